//! `nodeN/numastat`: a node's allocation counters (`numa_hit 123` per line).

use pinctl_topology::NodeId;

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::{ParseError, counters};

/// The counters of `nodeN/numastat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumaStat {
    pub numa_hit: u64,
    pub numa_miss: u64,
    pub numa_foreign: u64,
    pub interleave_hit: u64,
    pub local_node: u64,
    pub other_node: u64,
}

/// Parses `numastat`. Unknown counters are ignored so newer
/// kernels still parse.
pub fn parse(text: &str) -> Result<NumaStat, ParseError> {
    let mut s = NumaStat::default();
    for (key, v) in counters(text)? {
        match key {
            "numa_hit" => s.numa_hit = v,
            "numa_miss" => s.numa_miss = v,
            "numa_foreign" => s.numa_foreign = v,
            "interleave_hit" => s.interleave_hit = v,
            "local_node" => s.local_node = v,
            "other_node" => s.other_node = v,
            _ => {}
        }
    }
    Ok(s)
}

/// The `numastat` of `node` under the root of `files`, `None` when there is none.
pub fn read(files: &mut dyn KernelFiles, node: NodeId) -> Result<Option<NumaStat>, DiscoveryError> {
    parsed(files, &super::file(node, "numastat"), parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_of_a_node() {
        let s = parse(
            "numa_hit 6451\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 1\nlocal_node 6400\n\
             other_node 51\nnew_counter 5\n",
        )
        .unwrap();
        assert_eq!(s.numa_hit, 6451);
        assert_eq!(s.other_node, 51);
        assert_eq!(s.interleave_hit, 1);
        assert!(parse("numa_hit lots\n").is_err());
        let mut fs = crate::FsRoot::new("/".as_ref());
        let first = super::super::ids(&mut fs).unwrap()[0];
        assert!(read(&mut fs, first).unwrap().unwrap().numa_hit > 0);
    }
}
