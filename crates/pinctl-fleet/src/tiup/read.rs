//! Reading a TiUP cluster topology (pingcap/tiup `pkg/cluster/spec`, `Specification`): every
//! `*_servers` section's instances with where each of their keys is written, so that the
//! editor can change `numa_node`/`numa_cores` in place. The YAML is parsed by yaml-rust2; its
//! events carry each scalar's line and column.

use std::path::{Path, PathBuf};

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A scalar value of an instance, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub value: String,
    /// 1-based line of the value.
    pub line: usize,
    /// 0-based column, in characters, where the value (its opening quote) starts.
    pub column: usize,
    /// 0-based column, in characters, of the key.
    pub key_column: usize,
    pub style: Style,
}

/// How a scalar is quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Single,
    Double,
    /// A block scalar (`|`, `>`): never written by the editor.
    Block,
}

/// One instance of one `*_servers` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// `tikv_servers`.
    pub section: String,
    /// Its position in the section, from 0.
    pub index: usize,
    pub host: Field,
    /// The scalars of the instance by key (`port`, `data_dir`, `numa_node`, ...), in the order
    /// written; nested values (`config`, `resource_control`) are not kept.
    pub fields: Vec<(String, Field)>,
    /// Why the editor cannot touch it (a flow mapping, an alias); `None` when it can.
    pub not_editable: Option<String>,
}

impl Instance {
    /// The value of `key`, when written as a scalar.
    pub fn get(&self, key: &str) -> Option<&Field> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, f)| f)
    }
}

/// A TiUP topology: the instances, and `global`'s `deploy_dir` and `data_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TiupTopology {
    pub path: PathBuf,
    pub instances: Vec<Instance>,
    pub global_data_dir: Option<String>,
    pub global_deploy_dir: Option<String>,
}

/// Why a topology file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}:{line}:{column}: {message}")]
    At { path: PathBuf, line: usize, column: usize, message: String },
}

/// The events of a document with their places.
#[derive(Default)]
struct Events(Vec<(Event, Marker)>);

impl MarkedEventReceiver for Events {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.0.push((ev, mark));
    }
}

/// Reads the topology in `text` (the file at `path`, named in errors).
pub fn read(path: &Path, text: &str) -> Result<TiupTopology, ReadError> {
    let at = |line: usize, column: usize, message: String| ReadError::At {
        path: path.to_path_buf(),
        line,
        column,
        message,
    };
    let mut events = Events::default();
    Parser::new_from_str(text)
        .load(&mut events, false)
        .map_err(|e| at(e.marker().line(), e.marker().col() + 1, e.info().to_string()))?;
    let lines: Vec<&str> = text.lines().collect();
    let mut walk = Walk { events: &events.0, at: 0, lines: &lines };
    let mut topology = TiupTopology {
        path: path.to_path_buf(),
        instances: Vec::new(),
        global_data_dir: None,
        global_deploy_dir: None,
    };
    // StreamStart, DocumentStart, then the top-level mapping.
    walk.at = 2;
    match walk.peek() {
        Some((Event::MappingStart(..), _)) => walk.at += 1,
        Some((_, m)) => {
            return Err(at(
                m.line(),
                m.col() + 1,
                "a TiUP topology is a mapping of sections".into(),
            ));
        }
        None => return Ok(topology),
    }
    while let Some((Event::Scalar(key, ..), mark)) = walk.peek().cloned() {
        walk.at += 1;
        if key.ends_with("_servers") {
            walk.section(&key, &mut topology.instances)
                .map_err(|(m, message)| at(m.line(), m.col() + 1, message))?;
        } else if key == "global" {
            let fields = walk
                .scalars_of_mapping()
                .map_err(|(m, message)| at(m.line(), m.col() + 1, message))?;
            for (k, f) in fields.0 {
                match k.as_str() {
                    "data_dir" => topology.global_data_dir = Some(f.value),
                    "deploy_dir" => topology.global_deploy_dir = Some(f.value),
                    _ => {}
                }
            }
        } else {
            walk.skip();
        }
        let _ = mark;
    }
    Ok(topology)
}

/// A cursor over the events.
struct Walk<'a> {
    events: &'a [(Event, Marker)],
    at: usize,
    lines: &'a [&'a str],
}

type Failed = (Marker, String);

/// A mapping's scalar keys and values, and the first key that is (or merges) an alias.
type Scalars = (Vec<(String, Field)>, Option<String>);

impl Walk<'_> {
    fn peek(&self) -> Option<&(Event, Marker)> {
        self.events.get(self.at)
    }

    /// Steps over one node, whatever it holds.
    fn skip(&mut self) {
        let mut depth = 0usize;
        while let Some((ev, _)) = self.events.get(self.at) {
            self.at += 1;
            match ev {
                Event::MappingStart(..) | Event::SequenceStart(..) => depth += 1,
                Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
                _ => {}
            }
            if depth == 0 {
                return;
            }
        }
    }

    /// A `*_servers` section: a sequence of mappings (or nothing: `tidb_servers:` left empty).
    fn section(&mut self, section: &str, out: &mut Vec<Instance>) -> Result<(), Failed> {
        match self.peek().cloned() {
            Some((Event::SequenceStart(..), _)) => self.at += 1,
            Some((Event::Scalar(v, ..), _)) if v.is_empty() || v == "null" || v == "~" => {
                self.at += 1;
                return Ok(());
            }
            Some((_, m)) => return Err((m, format!("`{section}` is not a list of instances"))),
            None => return Ok(()),
        }
        let mut index = 0;
        loop {
            match self.peek().cloned() {
                Some((Event::SequenceEnd, _)) => {
                    self.at += 1;
                    return Ok(());
                }
                Some((Event::MappingStart(..), start)) => {
                    let flow = self.char_at(&start) == Some('{');
                    let (fields, alias) = self.scalars_of_mapping()?;
                    let Some(host) =
                        fields.iter().find(|(k, _)| k == "host").map(|(_, f)| f.clone())
                    else {
                        return Err((start, format!("an instance of `{section}` has no `host`")));
                    };
                    let not_editable = if flow {
                        Some("it is written as a flow mapping (`{host: ...}`)".to_string())
                    } else {
                        alias.map(|k| format!("its `{k}` is a YAML alias"))
                    };
                    out.push(Instance {
                        section: section.to_string(),
                        index,
                        host,
                        fields,
                        not_editable,
                    });
                    index += 1;
                }
                Some((_, m)) => {
                    return Err((m, format!("an instance of `{section}` is not a mapping")));
                }
                None => return Ok(()),
            }
        }
    }

    /// The scalar keys and values of the mapping at the cursor (nested values skipped), and
    /// the first key whose value is an alias or that merges one (`<<`).
    fn scalars_of_mapping(&mut self) -> Result<Scalars, Failed> {
        match self.peek() {
            Some((Event::MappingStart(..), _)) => self.at += 1,
            _ => {
                self.skip();
                return Ok((Vec::new(), None));
            }
        }
        let mut fields = Vec::new();
        let mut alias = None;
        loop {
            let Some((ev, key_mark)) = self.peek().cloned() else { return Ok((fields, alias)) };
            self.at += 1;
            let key = match ev {
                Event::MappingEnd => return Ok((fields, alias)),
                Event::Scalar(key, ..) => key,
                _ => return Err((key_mark, "a key that is not a plain string".into())),
            };
            match self.peek().cloned() {
                Some((Event::Scalar(value, style, ..), mark)) => {
                    self.at += 1;
                    let field = Field {
                        value,
                        line: mark.line(),
                        column: mark.col(),
                        key_column: key_mark.col(),
                        style: match style {
                            TScalarStyle::Plain => Style::Plain,
                            TScalarStyle::SingleQuoted => Style::Single,
                            TScalarStyle::DoubleQuoted => Style::Double,
                            _ => Style::Block,
                        },
                    };
                    if key == "<<" {
                        alias.get_or_insert(key.clone());
                    }
                    fields.push((key, field));
                }
                Some((Event::Alias(..), _)) => {
                    self.at += 1;
                    alias.get_or_insert(key);
                }
                _ => {
                    if key == "<<" {
                        alias.get_or_insert(key);
                    }
                    self.skip();
                }
            }
        }
    }

    fn char_at(&self, mark: &Marker) -> Option<char> {
        self.lines.get(mark.line().checked_sub(1)?)?.chars().nth(mark.col())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "\
global:
  data_dir: /tidb-data # where data goes
tikv_servers:
  - host: 10.0.1.16
    port: 20160
    numa_node: \"0\"
    config:
      server.labels: { zone: z1 }
  -   host: '10.0.1.17'
pd_servers:
  - {host: 10.0.1.11}
grafana_servers:
tidb_servers: []
";

    #[test]
    fn instances_and_where_their_keys_are() {
        let t = read(Path::new("t.yaml"), SMALL).unwrap();
        assert_eq!(t.global_data_dir.as_deref(), Some("/tidb-data"));
        assert_eq!(t.instances.len(), 3);
        let kv = &t.instances[0];
        assert_eq!((kv.section.as_str(), kv.index), ("tikv_servers", 0));
        assert_eq!((kv.host.value.as_str(), kv.host.line, kv.host.key_column), ("10.0.1.16", 4, 4));
        let numa = kv.get("numa_node").unwrap();
        assert_eq!(
            (numa.value.as_str(), numa.line, numa.column, numa.style),
            ("0", 6, 15, Style::Double)
        );
        assert!(kv.get("config").is_none(), "nested values are not scalars");
        let second = &t.instances[1];
        assert_eq!(
            (second.host.value.as_str(), second.host.key_column, second.host.style),
            ("10.0.1.17", 6, Style::Single)
        );
        assert!(second.not_editable.is_none());
        assert!(t.instances[2].not_editable.as_deref().unwrap().contains("flow mapping"));
    }

    #[test]
    fn errors_point_into_the_file() {
        let err = read(Path::new("t.yaml"), "tikv_servers:\n  - port: 1\n").unwrap_err();
        assert!(err.to_string().starts_with("t.yaml:2:"), "{err}");
        assert!(err.to_string().contains("no `host`"), "{err}");
        let err = read(Path::new("t.yaml"), "tikv_servers: [\n").unwrap_err();
        assert!(err.to_string().starts_with("t.yaml:"), "{err}");
        let err = read(Path::new("t.yaml"), "tikv_servers: 3\n").unwrap_err();
        assert!(err.to_string().contains("not a list"), "{err}");
    }

    #[test]
    fn aliases_make_an_instance_read_only() {
        let text = "x: &h 10.0.0.1\ntikv_servers:\n  - host: *h\n  - host: a\n    numa_node: *h\n";
        let err = read(Path::new("t.yaml"), text);
        // `host` itself an alias: the instance has no host scalar to name.
        assert!(err.is_err());
        let text = "x: &n \"0\"\ntikv_servers:\n  - host: a\n    numa_node: *n\n";
        let t = read(Path::new("t.yaml"), text).unwrap();
        assert!(
            t.instances[0].not_editable.as_deref().unwrap().contains("`numa_node` is a YAML alias")
        );
    }
}
