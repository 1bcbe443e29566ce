//! Where a part's decoded bytes come from when the writer streams it: bytes already in
//! memory, or a [`PartSource`] read piece by piece only when the writer's window reaches the
//! part (a model's tensor read through `ReadAt`, cast on the way), so memory stays bounded.

use crate::error::Result;
use std::borrow::Cow;
use std::ops::Range;

/// Decoded bytes read on demand. `read` is called with ranges inside `0..len()`, from any
/// thread, in any order; a source that can only produce its bytes whole says so with
/// [`PartSource::whole`] and is then read once, as `0..len()`.
pub trait PartSource: Send + Sync {
    /// Length of the part's decoded bytes.
    fn len(&self) -> u64;

    /// Whether the part has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The decoded bytes in `range` (within `0..len()`), borrowed where the source can.
    fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>>;

    /// Sub-ranges cost as much as the whole (a compressed input part): read it once.
    fn whole(&self) -> bool {
        false
    }
}

/// A part's bytes: in memory, or read when needed.
pub enum PartBytes<'a> {
    /// The bytes, held in memory (borrowed or owned).
    Mem(Cow<'a, [u8]>),
    /// A source the writer reads the bytes from when it reaches the part.
    Lazy(Box<dyn PartSource + 'a>),
}

impl std::fmt::Debug for PartBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartBytes::Mem(b) => write!(f, "Mem({} bytes)", b.len()),
            PartBytes::Lazy(s) => write!(f, "Lazy({} bytes)", s.len()),
        }
    }
}

impl PartBytes<'_> {
    /// Length of the bytes.
    pub fn len(&self) -> u64 {
        match self {
            PartBytes::Mem(b) => b.len() as u64,
            PartBytes::Lazy(s) => s.len(),
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether reads must take the whole part at once.
    pub fn whole(&self) -> bool {
        matches!(self, PartBytes::Lazy(s) if s.whole())
    }

    /// The bytes of `range` (inside `0..len()`).
    pub fn read(&self, range: Range<u64>) -> Result<Cow<'_, [u8]>> {
        match self {
            PartBytes::Mem(b) => Ok(Cow::Borrowed(&b[range.start as usize..range.end as usize])),
            PartBytes::Lazy(s) => s.read(range),
        }
    }

    /// All the bytes (reads a lazy source whole).
    pub fn all(&self) -> Result<Cow<'_, [u8]>> {
        self.read(0..self.len())
    }
}
