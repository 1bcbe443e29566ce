//! The Thrift structures of a Parquet footer and page header as parquet.thrift defines them:
//! for each field id the compact type a well-formed file declares. arrow-rs reads a field whose
//! id it knows by the type it expects, whatever type the field header declares, while a walk
//! that skips by the declared type goes elsewhere in the bytes. Holding every known field to
//! its type makes the two agree.

/// The compact type codes (Thrift compact protocol).
pub(super) mod code {
    pub const TRUE: u8 = 1;
    pub const FALSE: u8 = 2;
    pub const BYTE: u8 = 3;
    pub const I16: u8 = 4;
    pub const I32: u8 = 5;
    pub const I64: u8 = 6;
    pub const DOUBLE: u8 = 7;
    pub const BINARY: u8 = 8;
    pub const LIST: u8 = 9;
    pub const STRUCT: u8 = 12;
}

/// How a known field is read.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    /// A scalar or binary of this compact type (bool: either bool code).
    Scalar(u8),
    /// A list of scalars of this compact type.
    List(u8),
    /// A list of structs.
    ListOf(&'static Shape),
    /// A struct (or a union: the same on the wire).
    Struct(&'static Shape),
}

impl Ty {
    /// The type code the field header must declare.
    pub(super) fn code(self) -> u8 {
        match self {
            Ty::Scalar(c) => c,
            Ty::List(_) | Ty::ListOf(_) => code::LIST,
            Ty::Struct(_) => code::STRUCT,
        }
    }
}

pub(super) struct Shape {
    pub name: &'static str,
    pub fields: &'static [(i16, Ty)],
}

impl Shape {
    pub(super) fn field(&self, id: i64) -> Option<Ty> {
        self.fields
            .iter()
            .find(|(i, _)| i64::from(*i) == id)
            .map(|&(_, t)| t)
    }
}

use code::*;
use Ty::{List, ListOf, Scalar, Struct};

const BOOL: Ty = Scalar(TRUE);
const I32: Ty = Scalar(code::I32);
const I64: Ty = Scalar(code::I64);
const BIN: Ty = Scalar(BINARY);

/// Unions' variants without fields (an empty struct each).
const EMPTY: Shape = Shape {
    name: "empty struct",
    fields: &[],
};

pub(super) const FILE_META_DATA: Shape = Shape {
    name: "FileMetaData",
    fields: &[
        (1, I32),
        (2, ListOf(&SCHEMA_ELEMENT)),
        (3, I64),
        (4, ListOf(&ROW_GROUP)),
        (5, ListOf(&KEY_VALUE)),
        (6, BIN),
        (7, ListOf(&COLUMN_ORDER)),
        (8, Struct(&ENCRYPTION_ALGORITHM)),
        (9, BIN),
    ],
};

pub(super) const SCHEMA_ELEMENT: Shape = Shape {
    name: "SchemaElement",
    fields: &[
        (1, I32),
        (2, I32),
        (3, I32),
        (4, BIN),
        (5, I32),
        (6, I32),
        (7, I32),
        (8, I32),
        (9, I32),
        (10, Struct(&LOGICAL_TYPE)),
    ],
};

const LOGICAL_TYPE: Shape = Shape {
    name: "LogicalType",
    fields: &[
        (1, Struct(&EMPTY)),
        (2, Struct(&EMPTY)),
        (3, Struct(&EMPTY)),
        (4, Struct(&EMPTY)),
        (5, Struct(&DECIMAL_TYPE)),
        (6, Struct(&EMPTY)),
        (7, Struct(&TIME_TYPE)),
        (8, Struct(&TIME_TYPE)),
        (10, Struct(&INT_TYPE)),
        (11, Struct(&EMPTY)),
        (12, Struct(&EMPTY)),
        (13, Struct(&EMPTY)),
        (14, Struct(&EMPTY)),
        (15, Struct(&EMPTY)),
        (16, Struct(&VARIANT_TYPE)),
        (17, Struct(&GEOMETRY_TYPE)),
        (18, Struct(&GEOGRAPHY_TYPE)),
        (19, Struct(&EMPTY)),
    ],
};

const DECIMAL_TYPE: Shape = Shape {
    name: "DecimalType",
    fields: &[(1, I32), (2, I32)],
};

/// TimeType and TimestampType.
const TIME_TYPE: Shape = Shape {
    name: "TimeType",
    fields: &[(1, BOOL), (2, Struct(&TIME_UNIT))],
};

const TIME_UNIT: Shape = Shape {
    name: "TimeUnit",
    fields: &[
        (1, Struct(&EMPTY)),
        (2, Struct(&EMPTY)),
        (3, Struct(&EMPTY)),
    ],
};

const INT_TYPE: Shape = Shape {
    name: "IntType",
    fields: &[(1, Scalar(BYTE)), (2, BOOL)],
};

const VARIANT_TYPE: Shape = Shape {
    name: "VariantType",
    fields: &[(1, Scalar(BYTE))],
};

const GEOMETRY_TYPE: Shape = Shape {
    name: "GeometryType",
    fields: &[(1, BIN)],
};

const GEOGRAPHY_TYPE: Shape = Shape {
    name: "GeographyType",
    fields: &[(1, BIN), (2, I32)],
};

const ROW_GROUP: Shape = Shape {
    name: "RowGroup",
    fields: &[
        (1, ListOf(&COLUMN_CHUNK)),
        (2, I64),
        (3, I64),
        (4, ListOf(&SORTING_COLUMN)),
        (5, I64),
        (6, I64),
        (7, Scalar(code::I16)),
    ],
};

const COLUMN_CHUNK: Shape = Shape {
    name: "ColumnChunk",
    fields: &[
        (1, BIN),
        (2, I64),
        (3, Struct(&COLUMN_META_DATA)),
        (4, I64),
        (5, I32),
        (6, I64),
        (7, I32),
        (8, Struct(&COLUMN_CRYPTO_META_DATA)),
        (9, BIN),
    ],
};

const COLUMN_META_DATA: Shape = Shape {
    name: "ColumnMetaData",
    fields: &[
        (1, I32),
        (2, List(code::I32)),
        (3, List(BINARY)),
        (4, I32),
        (5, I64),
        (6, I64),
        (7, I64),
        (8, ListOf(&KEY_VALUE)),
        (9, I64),
        (10, I64),
        (11, I64),
        (12, Struct(&STATISTICS)),
        (13, ListOf(&PAGE_ENCODING_STATS)),
        (14, I64),
        (15, I32),
        (16, Struct(&SIZE_STATISTICS)),
        (17, Struct(&GEOSPATIAL_STATISTICS)),
    ],
};

const STATISTICS: Shape = Shape {
    name: "Statistics",
    fields: &[
        (1, BIN),
        (2, BIN),
        (3, I64),
        (4, I64),
        (5, BIN),
        (6, BIN),
        (7, BOOL),
        (8, BOOL),
        (9, I64),
    ],
};

const PAGE_ENCODING_STATS: Shape = Shape {
    name: "PageEncodingStats",
    fields: &[(1, I32), (2, I32), (3, I32)],
};

const SIZE_STATISTICS: Shape = Shape {
    name: "SizeStatistics",
    fields: &[(1, I64), (2, List(code::I64)), (3, List(code::I64))],
};

const GEOSPATIAL_STATISTICS: Shape = Shape {
    name: "GeospatialStatistics",
    fields: &[(1, Struct(&BOUNDING_BOX)), (2, List(code::I32))],
};

const BOUNDING_BOX: Shape = Shape {
    name: "BoundingBox",
    fields: &[
        (1, Scalar(DOUBLE)),
        (2, Scalar(DOUBLE)),
        (3, Scalar(DOUBLE)),
        (4, Scalar(DOUBLE)),
        (5, Scalar(DOUBLE)),
        (6, Scalar(DOUBLE)),
        (7, Scalar(DOUBLE)),
        (8, Scalar(DOUBLE)),
    ],
};

const SORTING_COLUMN: Shape = Shape {
    name: "SortingColumn",
    fields: &[(1, I32), (2, BOOL), (3, BOOL)],
};

const KEY_VALUE: Shape = Shape {
    name: "KeyValue",
    fields: &[(1, BIN), (2, BIN)],
};

const COLUMN_ORDER: Shape = Shape {
    name: "ColumnOrder",
    fields: &[(1, Struct(&EMPTY))],
};

const ENCRYPTION_ALGORITHM: Shape = Shape {
    name: "EncryptionAlgorithm",
    fields: &[(1, Struct(&AES_GCM)), (2, Struct(&AES_GCM))],
};

/// AesGcmV1 and AesGcmCtrV1.
const AES_GCM: Shape = Shape {
    name: "AesGcmV1",
    fields: &[(1, BIN), (2, BIN), (3, BOOL)],
};

const COLUMN_CRYPTO_META_DATA: Shape = Shape {
    name: "ColumnCryptoMetaData",
    fields: &[
        (1, Struct(&EMPTY)),
        (2, Struct(&ENCRYPTION_WITH_COLUMN_KEY)),
    ],
};

const ENCRYPTION_WITH_COLUMN_KEY: Shape = Shape {
    name: "EncryptionWithColumnKey",
    fields: &[(1, List(BINARY)), (2, BIN)],
};

pub(super) const PAGE_HEADER: Shape = Shape {
    name: "PageHeader",
    fields: &[
        (1, I32),
        (2, I32),
        (3, I32),
        (4, I32),
        (5, Struct(&DATA_PAGE_HEADER)),
        (6, Struct(&EMPTY)),
        (7, Struct(&DICTIONARY_PAGE_HEADER)),
        (8, Struct(&DATA_PAGE_HEADER_V2)),
    ],
};

pub(super) const DATA_PAGE_HEADER: Shape = Shape {
    name: "DataPageHeader",
    fields: &[
        (1, I32),
        (2, I32),
        (3, I32),
        (4, I32),
        (5, Struct(&STATISTICS)),
    ],
};

pub(super) const DICTIONARY_PAGE_HEADER: Shape = Shape {
    name: "DictionaryPageHeader",
    fields: &[(1, I32), (2, I32), (3, BOOL)],
};

pub(super) const DATA_PAGE_HEADER_V2: Shape = Shape {
    name: "DataPageHeaderV2",
    fields: &[
        (1, I32),
        (2, I32),
        (3, I32),
        (4, I32),
        (5, I32),
        (6, I32),
        (7, BOOL),
        (8, Struct(&STATISTICS)),
    ],
};
