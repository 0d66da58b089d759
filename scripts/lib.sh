# Shared by scripts/test, scripts/bench, scripts/build-deb and scripts/test-deb (sourced, not run).

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

# The static build (`cargo build-static`, .cargo/config.toml) links musl: its Rust target and
# where the binary lands.
STATIC_TARGET=x86_64-unknown-linux-musl
STATIC_PINCTL=target/$STATIC_TARGET/static/pinctl

# ensure_static_target: adds the musl target's standard library when rustup lacks it.
ensure_static_target() {
    rustup target list --installed 2>/dev/null | grep -qx "$STATIC_TARGET" && return 0
    step "rustup target add $STATIC_TARGET (the static build)"
    rustup target add "$STATIC_TARGET"
}

# Versions of the cargo tools scripts/test installs when they are missing: pinned, and built
# with --locked, so CI runs the same checks every time (and a release that needs a newer Rust
# than the machine's does not break it).
CARGO_MACHETE_VERSION=0.9.2
CARGO_DENY_VERSION=0.20.2

# ensure_cargo_tool NAME VERSION: `cargo install --locked NAME@VERSION` unless NAME is on PATH.
ensure_cargo_tool() {
    command -v "$1" >/dev/null && return 0
    step "cargo install $1@$2"
    cargo install --locked "$1@$2"
}
