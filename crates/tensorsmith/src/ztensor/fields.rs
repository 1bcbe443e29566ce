//! Typed access to manifest fields: each miss or wrong type becomes a schema error that
//! names the field, so every manifest reader reports problems the same way.

use crate::error::{ErrorKind, Result};
use crate::index::{MetaValue, Shape};
use crate::ztensor::cbor::Value;
use std::collections::BTreeMap;

pub fn schema(msg: impl Into<String>) -> crate::Error {
    ErrorKind::ZtSchema(msg.into()).into()
}

pub fn map<'v, 'a>(v: &'v Value<'a>, what: &str) -> Result<&'v [(Value<'a>, Value<'a>)]> {
    v.as_map()
        .ok_or_else(|| schema(format!("{what} must be a map")))
}

pub fn req<'v, 'a>(m: &'v Value<'a>, key: &str, what: &str) -> Result<&'v Value<'a>> {
    m.get(key)
        .ok_or_else(|| schema(format!("{what} has no '{key}'")))
}

pub fn text<'a>(v: &Value<'a>, key: &str) -> Result<&'a str> {
    v.as_text()
        .ok_or_else(|| schema(format!("'{key}' must be a text string")))
}

pub fn uint(v: &Value<'_>, key: &str) -> Result<u64> {
    v.as_u64()
        .ok_or_else(|| schema(format!("'{key}' must be an unsigned integer")))
}

pub fn req_text<'a>(m: &Value<'a>, key: &str, what: &str) -> Result<&'a str> {
    text(req(m, key, what)?, key)
}

pub fn req_uint(m: &Value<'_>, key: &str, what: &str) -> Result<u64> {
    uint(req(m, key, what)?, key)
}

pub fn opt_text<'a>(m: &Value<'a>, key: &str) -> Result<Option<&'a str>> {
    m.get(key).map(|v| text(v, key)).transpose()
}

pub fn opt_uint(m: &Value<'_>, key: &str) -> Result<Option<u64>> {
    m.get(key).map(|v| uint(v, key)).transpose()
}

/// A shape: an array of unsigned integers whose product does not overflow.
pub fn shape(v: &Value<'_>) -> Result<Shape> {
    let a = v
        .as_array()
        .ok_or_else(|| schema("'shape' must be an array"))?;
    let mut s = Shape::with_capacity(a.len());
    for d in a {
        s.push(uint(d, "shape")?);
    }
    if s.iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .is_none()
    {
        return Err(ErrorKind::ShapeOverflow.into());
    }
    Ok(s)
}

/// An attributes map (text keys, any values).
pub fn attributes(v: Option<&Value<'_>>) -> Result<BTreeMap<String, MetaValue>> {
    match v {
        None => Ok(BTreeMap::new()),
        Some(v) => match v.to_meta()? {
            MetaValue::Map(m) => Ok(m),
            _ => Err(schema("'attributes' must be a map")),
        },
    }
}
