//! A walk over Thrift compact bytes that consumes them as arrow-rs (60.1) does, so that what
//! the guard checks is what the reader will read, and that costs time in proportion to the
//! bytes.
//!
//! Where arrow-rs departs from the compact protocol, the walk follows arrow-rs: a field header
//! whose type nibble is 0 ends a struct whatever its upper nibble, and a bool element of a list,
//! set or map that it skips takes no bytes (the protocol writes one byte each; arrow-rs then
//! reads on from the wrong place, and so does the walk). Lists, sets and maps that declare
//! more elements than the bytes left could hold are refused: real writers never write one, and
//! arrow-rs would spend time on each declared element (the 0-byte bools) before failing.

use super::shapes::{code, Shape, Ty};

/// Deepest nesting accepted, as the Parquet reader's own skip limit.
const MAX_DEPTH: u32 = 64;

/// Why a walk stopped.
#[derive(Debug, PartialEq)]
pub(super) enum Stop {
    /// The bytes ended inside a structure (a longer read may help).
    Eof,
    /// The bytes cannot be what the reader expects (the reason).
    Bad(&'static str),
    /// A known field whose header declares another type than the format gives it.
    WrongType {
        shape: &'static str,
        id: i64,
        declared: u8,
    },
}

impl Stop {
    pub(super) fn reason(&self) -> String {
        match self {
            Stop::Eof => "the bytes end inside a structure".into(),
            Stop::Bad(why) => (*why).into(),
            Stop::WrongType {
                shape,
                id,
                declared,
            } => format!(
                "field {id} of {shape} is declared as Thrift compact type {declared}, \
                 not the type the Parquet format gives it"
            ),
        }
    }
}

/// Sees each field of a struct (after its type is checked against the shape) and returns
/// true when it consumed the value itself.
pub(super) type Hook<'h> = &'h mut dyn FnMut(&mut Walker, i64, u8) -> Result<bool, Stop>;

fn no_hook(_: &mut Walker, _: i64, _: u8) -> Result<bool, Stop> {
    Ok(false)
}

/// Both bool codes are one type.
fn same_type(declared: u8, expected: u8) -> bool {
    let bool_code = |c: u8| if c == code::FALSE { code::TRUE } else { c };
    bool_code(declared) == bool_code(expected)
}

pub(super) struct Walker<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl Walker<'_> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Result<u8, Stop> {
        let b = *self.buf.get(self.pos).ok_or(Stop::Eof)?;
        self.pos += 1;
        Ok(b)
    }

    fn skip(&mut self, n: usize) -> Result<(), Stop> {
        if n > self.left() {
            return Err(Stop::Eof);
        }
        self.pos += n;
        Ok(())
    }

    /// A varint of at most 10 bytes (arrow-rs reads longer ones, folding the extra bits
    /// back in; none is ever written, so the walk refuses them).
    fn varint(&mut self) -> Result<u64, Stop> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Stop::Bad("a varint longer than 10 bytes"))
    }

    pub(super) fn zigzag(&mut self) -> Result<i64, Stop> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A list or set header: element type and count, the count checked against the bytes
    /// left.
    pub(super) fn list_header(&mut self) -> Result<(u8, u64), Stop> {
        let h = self.byte()?;
        let n = match h >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        if n > self.left() as u64 {
            return Err(Stop::Bad("a list longer than the bytes that follow it"));
        }
        Ok((h & 0x0f, n))
    }

    /// Walks a list of structs: `each` walks element `i` of the `n` the header declares.
    pub(super) fn struct_list(
        &mut self,
        each: &mut dyn FnMut(&mut Self, u64) -> Result<(), Stop>,
    ) -> Result<(), Stop> {
        let (elem, n) = self.list_header()?;
        if n > 0 && elem != code::STRUCT {
            return Err(Stop::Bad("a list of structs declares another element type"));
        }
        for _ in 0..n {
            each(self, n)?;
        }
        Ok(())
    }

    /// Walks one value of compact type `t` as arrow-rs skips it; `in_container`: an element
    /// of a list, set or map.
    fn value(&mut self, t: u8, in_container: bool, depth: u32) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Bad("Thrift structures nested deeper than 64"));
        }
        match t {
            // A bool field's value is in its header; arrow-rs skips a bool element as
            // nothing too.
            1 | 2 => Ok(()),
            3 => self.skip(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                self.skip(usize::try_from(n).map_err(|_| Stop::Eof)?)
            }
            9 | 10 => {
                let (elem, n) = self.list_header()?;
                for _ in 0..n {
                    self.value(elem, true, depth + 1)?;
                }
                Ok(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                if n.saturating_mul(2) > self.left() as u64 {
                    return Err(Stop::Bad("a map longer than the bytes that follow it"));
                }
                for _ in 0..n {
                    self.value(kv >> 4, true, depth + 1)?;
                    self.value(kv & 0x0f, true, depth + 1)?;
                }
                Ok(())
            }
            12 => self.structure(depth + 1, None, &mut no_hook),
            13 => self.skip(16),
            _ if in_container => Err(Stop::Bad("a list of an unknown Thrift type")),
            _ => Err(Stop::Bad("an unknown Thrift type")),
        }
    }

    /// Walks a struct. Fields `shape` knows must be declared with their type and are walked
    /// by it; `hook` sees each field first.
    pub(super) fn structure(
        &mut self,
        depth: u32,
        shape: Option<&Shape>,
        hook: Hook,
    ) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Bad("Thrift structures nested deeper than 64"));
        }
        // Field ids as arrow-rs computes them: i16, a long-form id truncated to i16, a delta
        // that overflows refused.
        let mut id = 0i16;
        loop {
            let h = self.byte()?;
            let t = h & 0x0f;
            if t == 0 {
                return Ok(());
            }
            id = match h >> 4 {
                0 => self.zigzag()? as i16,
                d => id
                    .checked_add(i16::from(d))
                    .ok_or(Stop::Bad("a field id delta overflows"))?,
            };
            let known = shape.and_then(|s| Some((s.name, s.field(i64::from(id))?)));
            if let Some((name, ty)) = known {
                if !same_type(t, ty.code()) {
                    return Err(Stop::WrongType {
                        shape: name,
                        id: i64::from(id),
                        declared: t,
                    });
                }
            }
            if hook(self, i64::from(id), t)? {
                continue;
            }
            match known.map(|(_, ty)| ty) {
                Some(Ty::Struct(s)) => self.structure(depth + 1, Some(s), &mut no_hook)?,
                Some(Ty::ListOf(s)) => {
                    self.struct_list(&mut |w, _| w.structure(depth + 1, Some(s), &mut no_hook))?
                }
                Some(Ty::List(c)) => {
                    let (elem, n) = self.list_header()?;
                    if n > 0 && !same_type(elem, c) {
                        return Err(Stop::Bad("a list declares another element type"));
                    }
                    for _ in 0..n {
                        self.value(elem, true, depth + 1)?;
                    }
                }
                Some(Ty::Scalar(_)) | None => self.value(t, false, depth)?,
            }
        }
    }
}
