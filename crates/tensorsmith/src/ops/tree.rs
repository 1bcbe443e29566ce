//! Tensors grouped by dotted name prefix (`model.layers.0.attn.q.weight`), with tensor count
//! and byte total per group. Siblings sort with numeric parts as numbers (`2` before `10`),
//! numbers before words.

use crate::index::{TensorIndex, TensorInfo};
use std::cmp::Ordering;

/// A group of tensors under one prefix, or a tensor (a leaf).
#[derive(Debug)]
pub struct Node<'a> {
    /// The last name segment.
    pub segment: &'a str,
    /// Tensors at or under this node.
    pub tensors: u64,
    /// Decoded bytes of those tensors.
    pub bytes: u64,
    /// Elements of those tensors (the parameter count).
    pub parameters: u64,
    /// The tensor named by this node's full path, if there is one.
    pub tensor: Option<&'a TensorInfo>,
    /// The groups and tensors one segment further down.
    pub children: Vec<Node<'a>>,
}

impl<'a> Node<'a> {
    fn new(segment: &'a str) -> Node<'a> {
        Node {
            segment,
            tensors: 0,
            bytes: 0,
            parameters: 0,
            tensor: None,
            children: Vec::new(),
        }
    }

    fn insert(&mut self, mut path: std::str::Split<'a, char>, t: &'a TensorInfo) {
        self.tensors += 1;
        self.bytes += t.byte_len();
        self.parameters += t.elements();
        match path.next() {
            None => self.tensor = Some(t),
            Some(seg) => {
                let child = match self.children.iter().position(|c| c.segment == seg) {
                    Some(i) => &mut self.children[i],
                    None => {
                        self.children.push(Node::new(seg));
                        self.children.last_mut().expect("just pushed")
                    }
                };
                child.insert(path, t);
            }
        }
    }

    fn sort(&mut self) {
        self.children
            .sort_by(|a, b| segment_order(a.segment, b.segment));
        for c in &mut self.children {
            c.sort();
        }
    }
}

/// Numbers (as numbers) before words (bytewise).
pub fn segment_order(a: &str, b: &str) -> Ordering {
    fn num(s: &str) -> Option<&str> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.trim_start_matches('0'))
    }
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x.len().cmp(&y.len()).then(x.cmp(y)).then(a.cmp(b)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The tree of `index`'s tensors; the root has the empty segment.
pub fn build(index: &TensorIndex) -> Node<'_> {
    let mut root = Node::new("");
    for t in &index.tensors {
        root.insert(t.name.split('.'), t);
    }
    root.sort();
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_segments_sort_as_numbers() {
        let mut v = vec!["10", "2", "attn", "1", "02", "mlp", "0"];
        v.sort_by(|a, b| segment_order(a, b));
        assert_eq!(v, ["0", "1", "02", "2", "10", "attn", "mlp"]);
        // Longer than u64: still ordered by value.
        assert_eq!(
            segment_order("99999999999999999999999", "100000000000000000000000"),
            Ordering::Less
        );
    }
}
