//! A part's element type from its manifest entry: the storage `dtype`, plus the optional
//! logical `type` of v1.2 components and v2 parts, which must sit on the storage dtype the
//! logical type requires. v1.1 and v2 read it by the same rule, each with its dtype names. A
//! logical type that names a primitive dtype (`bf16` on `u16`, as ztensor 2.x writes it) is
//! read as that primitive when the widths agree.

use crate::dtype::DType;
use crate::error::{ErrorKind, Result};
use crate::index::ZtVersion;
use crate::ztensor::cbor::Value;
use crate::ztensor::fields::{self, req_text, schema};

/// The element dtype `m` declares (`what` names the entry in errors) and, for a logical
/// type this library does not know, that type's name: the dtype is then the storage one,
/// and the bytes must not be read as elements.
pub(crate) fn read(
    m: &Value<'_>,
    what: &str,
    version: ZtVersion,
) -> Result<(DType, Option<String>)> {
    let dtype_name = req_text(m, "dtype", what)?;
    let storage = match version {
        ZtVersion::V2 => DType::from_ztensor_v2_storage(dtype_name),
        _ => DType::from_ztensor_v11_name(dtype_name),
    }
    .ok_or_else(|| ErrorKind::UnknownDtype(dtype_name.to_string()))?;
    let Some(ty) = fields::opt_text(m, "type")? else {
        return Ok((storage, None));
    };
    match DType::from_ztensor_logical(ty) {
        Some((logical, needs)) if needs == storage => Ok((logical, None)),
        Some((_, needs)) => {
            let needs_name = match version {
                ZtVersion::V2 => needs.ztensor_v2_names().map(|n| n.0),
                _ => needs.ztensor_v11_name(),
            };
            Err(schema(format!(
                "type '{ty}' requires dtype {}, not '{dtype_name}'",
                needs_name.unwrap_or("?")
            )))
        }
        None => match DType::from_ztensor_v2_storage(ty) {
            // A primitive's name as the logical type of a storage dtype of its width:
            // ztensor 2.x writes `dtype: u16, type: bf16` (`Writer.add(.., "u16",
            // logical="bf16")`). The bytes are that primitive's elements.
            Some(primitive) if primitive.bits() == storage.bits() => Ok((primitive, None)),
            _ => Ok((storage, Some(ty.to_string()))),
        },
    }
}
