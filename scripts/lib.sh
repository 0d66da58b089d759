# Shared by scripts/test and scripts/bench (sourced, not run).

step() { printf '\n==> %s\n' "$*"; }

# install_packages PKG...: installs the Debian packages that are not installed yet
# (`apt-get update` first; sudo when not root).
install_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    step "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
