//! The walk over `ModelProto`: the model's facts (with proto2 field presence, which
//! weight-inspect's hash keeps), and every initializer with the path of the graph holding it:
//! the main graph's sparse and dense initializers, and those of subgraphs (If/Loop bodies in
//! node attributes, in the main graph and in functions), as `node/attribute/name`. A node's
//! segment is its name; a node without one, or whose name an earlier node of its graph took
//! (names are optional and need not be unique), is `name#i` (`#i` when unnamed), `i` its
//! place among the graph's nodes, so two If nodes with the same branch initializer never
//! clash. Graphs nest at most [`MAX_GRAPH_DEPTH`] deep; every other message is skipped
//! unread.

use super::tensor::{int, payload, read_tensor, text, RawTensor};
use super::wire::Fields;
use crate::error::{OnnxRule, Result};
use std::ops::Range;

/// Deepest nesting of graphs inside node attributes.
pub const MAX_GRAPH_DEPTH: usize = 32;

/// What the model says about itself; `None` where the field is absent from the wire.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    pub ir_version: Option<u64>,
    pub producer_name: Option<String>,
    pub producer_version: Option<String>,
    pub domain: Option<String>,
    pub model_version: Option<u64>,
    /// `(domain, version)` per `opset_import`, in file order.
    pub opsets: Vec<(Option<String>, Option<u64>)>,
    pub graph_name: Option<String>,
    pub node_count: u64,
    /// Present op types of the main graph's nodes, in node order.
    pub op_types: Vec<String>,
    /// Present names of the main graph's inputs and outputs; `None` when it has none.
    pub inputs: Option<Vec<String>>,
    pub outputs: Option<Vec<String>>,
    pub metadata_props: Vec<(String, String)>,
}

/// Where an initializer was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `graph.initializer`: the only ones weight-inspect hashes.
    Main,
    /// A subgraph's initializer; the path of its graph (`node/attribute`).
    Subgraph(String),
}

/// A sparse initializer: its dense dims and its `values` and `indices` tensors.
#[derive(Debug, Clone)]
pub(crate) struct RawSparse {
    /// The graph holding it (a subgraph's are named under its path, as dense ones are).
    pub origin: Origin,
    pub values: RawTensor,
    pub indices: RawTensor,
    pub dims: Vec<i64>,
}

/// Everything the walk collects.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub facts: Facts,
    pub tensors: Vec<(Origin, RawTensor)>,
    pub sparse: Vec<RawSparse>,
    pub has_graph: bool,
}

struct Walker<'a> {
    buf: &'a [u8],
    base: u64,
    out: Walk,
}

/// Walks the `ModelProto` that is the whole of `buf` (at file offset `base`).
pub(crate) fn walk(buf: &[u8], base: u64) -> Result<Walk> {
    const M: &str = "ModelProto";
    let mut w = Walker {
        buf,
        base,
        out: Walk::default(),
    };
    let mut graph = None;
    let mut functions = Vec::new();
    for f in Fields::new(buf, 0..buf.len(), base) {
        let f = f?;
        let facts = &mut w.out.facts;
        match f.number {
            1 => facts.ir_version = Some(int(&f, M, "ir_version", base)?),
            2 => facts.producer_name = Some(text(buf, &f, M, "producer_name", base)?),
            3 => facts.producer_version = Some(text(buf, &f, M, "producer_version", base)?),
            4 => facts.domain = Some(text(buf, &f, M, "domain", base)?),
            5 => facts.model_version = Some(int(&f, M, "model_version", base)?),
            7 => graph = Some(payload(&f, M, "graph", base)?),
            8 => {
                let r = payload(&f, M, "opset_import", base)?;
                let (mut d, mut v) = (None, None);
                for g in Fields::new(buf, r, base) {
                    let g = g?;
                    match g.number {
                        1 => d = Some(text(buf, &g, "OperatorSetIdProto", "domain", base)?),
                        2 => v = Some(int(&g, "OperatorSetIdProto", "version", base)?),
                        _ => {}
                    }
                }
                facts.opsets.push((d, v));
            }
            14 => {
                let kv = super::tensor::read_entry(buf, &f, base)?;
                facts.metadata_props.push(kv);
            }
            25 => functions.push(payload(&f, M, "functions", base)?),
            _ => {}
        }
    }
    if let Some(g) = graph {
        w.out.has_graph = true;
        w.graph(g, "", 0)?;
    }
    for r in functions {
        w.function(r)?;
    }
    Ok(w.out)
}

impl Walker<'_> {
    /// Walks a `GraphProto`; `prefix` is empty for the main graph, else `path/`.
    fn graph(&mut self, r: Range<usize>, prefix: &str, depth: usize) -> Result<()> {
        const M: &str = "GraphProto";
        if depth > MAX_GRAPH_DEPTH {
            return Err(OnnxRule::TooDeep {
                limit: MAX_GRAPH_DEPTH,
            }
            .into());
        }
        let (buf, base) = (self.buf, self.base);
        let main = depth == 0;
        let mut nodes = NodeNames::default();
        for f in Fields::new(buf, r, base) {
            let f = f?;
            match f.number {
                1 => {
                    let n = payload(&f, M, "node", base)?;
                    self.node(n, prefix, depth, main, &mut nodes)?;
                }
                2 if main => self.out.facts.graph_name = Some(text(buf, &f, M, "name", base)?),
                5 => {
                    let t = read_tensor(buf, payload(&f, M, "initializer", base)?, base)?;
                    let origin = if main {
                        Origin::Main
                    } else {
                        Origin::Subgraph(prefix.trim_end_matches('/').to_string())
                    };
                    self.out.tensors.push((origin, t));
                }
                11 | 12 if main => {
                    let v = payload(&f, M, "input/output", base)?;
                    let mut name = None;
                    for g in Fields::new(buf, v, base) {
                        let g = g?;
                        if g.number == 1 {
                            name = Some(text(buf, &g, "ValueInfoProto", "name", base)?);
                        }
                    }
                    let facts = &mut self.out.facts;
                    let list = if f.number == 11 {
                        &mut facts.inputs
                    } else {
                        &mut facts.outputs
                    };
                    let list = list.get_or_insert_with(Vec::new);
                    list.extend(name);
                }
                15 => {
                    let s = payload(&f, M, "sparse_initializer", base)?;
                    let origin = if main {
                        Origin::Main
                    } else {
                        Origin::Subgraph(prefix.trim_end_matches('/').to_string())
                    };
                    self.sparse(s, origin)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn sparse(&mut self, r: Range<usize>, origin: Origin) -> Result<()> {
        const M: &str = "SparseTensorProto";
        let (buf, base) = (self.buf, self.base);
        let (mut values, mut indices, mut dims) = (None, None, Vec::new());
        for f in Fields::new(buf, r, base) {
            let f = f?;
            match f.number {
                1 => values = Some(read_tensor(buf, payload(&f, M, "values", base)?, base)?),
                2 => indices = Some(read_tensor(buf, payload(&f, M, "indices", base)?, base)?),
                3 => match &f.value {
                    super::wire::Value::Len(p) => {
                        let mut q = p.start;
                        while q < p.end {
                            let (v, e) = super::wire::varint(buf, q, p.end, base)?;
                            dims.push(v as i64);
                            q = e;
                        }
                    }
                    _ => dims.push(int(&f, M, "dims", base)? as i64),
                },
                _ => {}
            }
        }
        let (Some(values), Some(indices)) = (values, indices) else {
            return Err(OnnxRule::Sparse("values or indices missing".into()).into());
        };
        self.out.sparse.push(RawSparse {
            origin,
            values,
            indices,
            dims,
        });
        Ok(())
    }

    /// A `NodeProto`: counted and typed when in the main graph; its graph attributes walked.
    fn node(
        &mut self,
        r: Range<usize>,
        prefix: &str,
        depth: usize,
        main: bool,
        nodes: &mut NodeNames,
    ) -> Result<()> {
        const M: &str = "NodeProto";
        let (buf, base) = (self.buf, self.base);
        let mut name = String::new();
        let mut attributes = Vec::new();
        for f in Fields::new(buf, r, base) {
            let f = f?;
            match f.number {
                3 => name = text(buf, &f, M, "name", base)?,
                4 if main => {
                    let op = text(buf, &f, M, "op_type", base)?;
                    self.out.facts.op_types.push(op);
                }
                5 => attributes.push(payload(&f, M, "attribute", base)?),
                _ => {}
            }
        }
        if main {
            self.out.facts.node_count += 1;
        }
        let segment = nodes.segment(name);
        for a in attributes {
            self.attribute(a, &format!("{prefix}{segment}/"), depth)?;
        }
        Ok(())
    }

    /// An `AttributeProto`: its graphs (`g`, `graphs`) walked one level deeper.
    fn attribute(&mut self, r: Range<usize>, prefix: &str, depth: usize) -> Result<()> {
        const M: &str = "AttributeProto";
        let (buf, base) = (self.buf, self.base);
        let mut name = String::new();
        let mut graphs = Vec::new();
        for f in Fields::new(buf, r, base) {
            let f = f?;
            match f.number {
                1 => name = text(buf, &f, M, "name", base)?,
                6 => graphs.push((None, payload(&f, M, "g", base)?)),
                11 => {
                    let i = graphs.len();
                    graphs.push((Some(i), payload(&f, M, "graphs", base)?));
                }
                _ => {}
            }
        }
        for (i, g) in graphs {
            let p = match i {
                None => format!("{prefix}{name}/"),
                Some(i) => format!("{prefix}{name}/{i}/"),
            };
            self.graph(g, &p, depth + 1)?;
        }
        Ok(())
    }

    /// A `FunctionProto`: its nodes' graph attributes, under `function_name/`.
    fn function(&mut self, r: Range<usize>) -> Result<()> {
        const M: &str = "FunctionProto";
        let (buf, base) = (self.buf, self.base);
        let mut name = String::new();
        let mut nodes = Vec::new();
        for f in Fields::new(buf, r, base) {
            let f = f?;
            match f.number {
                1 => name = text(buf, &f, M, "name", base)?,
                7 => nodes.push(payload(&f, M, "node", base)?),
                _ => {}
            }
        }
        let mut names = NodeNames::default();
        for n in nodes {
            self.node(n, &format!("{name}/"), 1, false, &mut names)?;
        }
        Ok(())
    }
}

/// The nodes of one graph seen so far: each node's path segment (see the module docs).
#[derive(Default)]
struct NodeNames {
    seen: std::collections::HashSet<String>,
    count: usize,
}

impl NodeNames {
    fn segment(&mut self, name: String) -> String {
        let i = self.count;
        self.count += 1;
        if name.is_empty() || self.seen.contains(&name) {
            format!("{name}#{i}")
        } else {
            self.seen.insert(name.clone());
            name
        }
    }
}
