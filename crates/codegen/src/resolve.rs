//! Resolves field types through domains to what the generated code reads and writes, and
//! assigns Rust names to enums, structs and operations.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Domain, Spec, StructDef};
use crate::names::studly;
use crate::Error;

/// Primitive encodings a field can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prim {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
    Boolean,
    Char,
    Datetime,
    Uuid,
    SequenceNo,
    Str8,
    Str16,
    Vbin8,
    Vbin16,
    Vbin32,
    Map,
    List,
    Array,
    Struct32,
    SequenceSet,
    ByteRanges,
}

impl Prim {
    fn from_type_name(name: &str) -> Option<Prim> {
        Some(match name {
            "uint8" => Prim::U8,
            "uint16" => Prim::U16,
            "uint32" => Prim::U32,
            "uint64" => Prim::U64,
            "int8" => Prim::I8,
            "int16" => Prim::I16,
            "int32" => Prim::I32,
            "int64" => Prim::I64,
            "float" => Prim::F32,
            "double" => Prim::F64,
            "boolean" => Prim::Boolean,
            "char" => Prim::Char,
            "datetime" => Prim::Datetime,
            "uuid" => Prim::Uuid,
            "sequence-no" => Prim::SequenceNo,
            "str8" => Prim::Str8,
            "str16" => Prim::Str16,
            "vbin8" => Prim::Vbin8,
            "vbin16" => Prim::Vbin16,
            "vbin32" => Prim::Vbin32,
            "map" => Prim::Map,
            "list" => Prim::List,
            "array" => Prim::Array,
            "struct32" => Prim::Struct32,
            "sequence-set" => Prim::SequenceSet,
            "byte-ranges" => Prim::ByteRanges,
            _ => return None,
        })
    }

    pub fn rust_type(self) -> &'static str {
        match self {
            Prim::U8 | Prim::Char => "u8",
            Prim::U16 => "u16",
            Prim::U32 | Prim::SequenceNo => "u32",
            Prim::U64 | Prim::Datetime => "u64",
            Prim::I8 => "i8",
            Prim::I16 => "i16",
            Prim::I32 => "i32",
            Prim::I64 => "i64",
            Prim::F32 => "f32",
            Prim::F64 => "f64",
            Prim::Boolean => "bool",
            Prim::Uuid => "[u8; 16]",
            Prim::Str8 | Prim::Str16 => "Str",
            Prim::Vbin8 | Prim::Vbin16 | Prim::Vbin32 => "Bytes",
            Prim::Map => "Map",
            Prim::List => "List",
            Prim::Array => "Array",
            Prim::Struct32 => "Struct32",
            Prim::SequenceSet => "SequenceSet",
            Prim::ByteRanges => "ByteRanges",
        }
    }

    /// Statement writing `v` (a reference) to `out`.
    pub fn encode(self, v: &str) -> String {
        match self {
            Prim::U8 | Prim::Char => format!("out.put_u8(*{v});"),
            Prim::U16 => format!("out.put_u16(*{v});"),
            Prim::U32 | Prim::SequenceNo => format!("out.put_u32(*{v});"),
            Prim::U64 | Prim::Datetime => format!("out.put_u64(*{v});"),
            Prim::I8 => format!("out.put_i8(*{v});"),
            Prim::I16 => format!("out.put_i16(*{v});"),
            Prim::I32 => format!("out.put_i32(*{v});"),
            Prim::I64 => format!("out.put_i64(*{v});"),
            Prim::F32 => format!("out.put_f32(*{v});"),
            Prim::F64 => format!("out.put_f64(*{v});"),
            Prim::Boolean => format!("out.put_u8(u8::from(*{v}));"),
            Prim::Uuid => format!("out.put_slice({v});"),
            Prim::Str8 => format!("codec::put_str8(out, {v})?;"),
            Prim::Str16 => format!("codec::put_str16(out, {v})?;"),
            Prim::Vbin8 => format!("codec::put_vbin8(out, {v})?;"),
            Prim::Vbin16 => format!("codec::put_vbin16(out, {v})?;"),
            Prim::Vbin32 => format!("codec::put_vbin32(out, {v})?;"),
            Prim::Map
            | Prim::List
            | Prim::Array
            | Prim::Struct32
            | Prim::SequenceSet
            | Prim::ByteRanges => format!("{v}.encode(out)?;"),
        }
    }

    /// Expression of type `Result<T, DecodeError>` reading from `r`.
    pub fn decode(self) -> &'static str {
        match self {
            Prim::U8 | Prim::Char => "r.u8()",
            Prim::U16 => "r.u16()",
            Prim::U32 | Prim::SequenceNo => "r.u32()",
            Prim::U64 | Prim::Datetime => "r.u64()",
            Prim::I8 => "r.i8()",
            Prim::I16 => "r.i16()",
            Prim::I32 => "r.i32()",
            Prim::I64 => "r.i64()",
            Prim::F32 => "r.f32()",
            Prim::F64 => "r.f64()",
            Prim::Boolean => "r.u8().map(|b| b != 0)",
            Prim::Uuid => "r.array::<16>()",
            Prim::Str8 => "r.str8()",
            Prim::Str16 => "r.str16()",
            Prim::Vbin8 => "r.vbin8()",
            Prim::Vbin16 => "r.vbin16()",
            Prim::Vbin32 => "r.vbin32()",
            Prim::Map => "Map::decode(r)",
            Prim::List => "List::decode(r)",
            Prim::Array => "Array::decode(r)",
            Prim::Struct32 => "Struct32::decode(r)",
            Prim::SequenceSet => "SequenceSet::decode(r)",
            Prim::ByteRanges => "ByteRanges::decode(r)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Carried by its packing flag alone.
    Bit,
    Prim(Prim),
    Enum {
        rust: String,
        repr: Prim,
    },
    Struct {
        rust: String,
    },
}

impl Kind {
    pub fn rust_type(&self) -> String {
        match self {
            Kind::Bit => "bool".into(),
            Kind::Prim(p) => p.rust_type().into(),
            Kind::Enum { rust, .. } | Kind::Struct { rust } => rust.clone(),
        }
    }

    pub fn encode(&self, v: &str) -> String {
        match self {
            Kind::Bit => String::new(),
            Kind::Prim(p) => p.encode(v),
            Kind::Enum { .. } => format!("{v}.encode(out);"),
            Kind::Struct { .. } => format!("{v}.encode(out)?;"),
        }
    }

    pub fn decode(&self) -> String {
        match self {
            Kind::Bit => String::new(),
            Kind::Prim(p) => p.decode().into(),
            Kind::Enum { rust, .. } | Kind::Struct { rust } => format!("{rust}::decode(r)"),
        }
    }
}

/// Rust names for everything the spec declares, and type resolution in class scope.
pub struct Resolver<'s> {
    spec: &'s Spec,
    /// (class, domain name) -> Rust enum name, for domains with choices.
    pub enum_names: BTreeMap<(Option<String>, String), String>,
    /// (class, struct name) -> Rust struct name.
    pub struct_names: BTreeMap<(String, String), String>,
}

/// Names too generic to stand alone in a flat namespace get their class as a prefix.
const PREFIXED_STRUCTS: &[&str] = &["header"];

impl<'s> Resolver<'s> {
    pub fn new(spec: &'s Spec) -> Result<Self, Error> {
        let mut enum_counts: BTreeMap<&str, usize> = BTreeMap::new();
        for d in all_domains(spec).filter(|d| !d.choices.is_empty()) {
            *enum_counts.entry(d.name.as_str()).or_default() += 1;
        }
        let mut enum_names = BTreeMap::new();
        for d in all_domains(spec).filter(|d| !d.choices.is_empty()) {
            let base = studly(&d.name);
            let rust = match (&d.class, enum_counts.get(d.name.as_str())) {
                (Some(class), Some(n)) if *n > 1 => studly(class) + &base,
                _ => base,
            };
            enum_names.insert((d.class.clone(), d.name.clone()), rust);
        }
        let mut struct_names = BTreeMap::new();
        for s in all_structs(spec) {
            let rust = if PREFIXED_STRUCTS.contains(&s.name.as_str()) {
                studly(&s.class) + &studly(&s.name)
            } else {
                studly(&s.name)
            };
            struct_names.insert((s.class.clone(), s.name.clone()), rust);
        }
        let mut seen = BTreeSet::new();
        let ops = spec.classes.iter().flat_map(|c| {
            c.controls
                .iter()
                .chain(&c.commands)
                .map(|o| studly(&o.class) + &studly(&o.name))
        });
        for name in enum_names
            .values()
            .cloned()
            .chain(struct_names.values().cloned())
            .chain(ops)
        {
            if !seen.insert(name.clone()) {
                return Err(Error::Spec(format!(
                    "two declarations map to Rust name {name}"
                )));
            }
        }
        Ok(Resolver {
            spec,
            enum_names,
            struct_names,
        })
    }

    fn domain(&self, class: Option<&str>, name: &str) -> Option<&'s Domain> {
        match class {
            Some(c) => self
                .spec
                .classes
                .iter()
                .find(|k| k.name == c)?
                .domains
                .iter()
                .find(|d| d.name == name),
            None => self.spec.domains.iter().find(|d| d.name == name),
        }
    }

    fn struct_def(&self, class: &str, name: &str) -> Option<&'s StructDef> {
        self.spec
            .classes
            .iter()
            .find(|k| k.name == class)?
            .structs
            .iter()
            .find(|s| s.name == name)
    }

    /// Resolves a type reference as written in class `class`: `class.name` qualified,
    /// then the class's own domains and structs, then top-level domains and types.
    pub fn resolve(&self, class: Option<&str>, ty: &str) -> Result<Kind, Error> {
        self.resolve_depth(class, ty, 0)
    }

    fn resolve_depth(&self, class: Option<&str>, ty: &str, depth: u32) -> Result<Kind, Error> {
        if depth > 16 {
            return Err(Error::Spec(format!("domain cycle at {ty}")));
        }
        if let Some((c, n)) = ty.split_once('.') {
            return self.resolve_in(Some(c), n, depth, ty);
        }
        if let Some(c) = class {
            if let Some(k) = self.try_class(c, ty, depth)? {
                return Ok(k);
            }
        }
        self.resolve_in(None, ty, depth, ty)
    }

    fn try_class(&self, class: &str, name: &str, depth: u32) -> Result<Option<Kind>, Error> {
        if let Some(d) = self.domain(Some(class), name) {
            return self.domain_kind(d, depth).map(Some);
        }
        if self.struct_def(class, name).is_some() {
            let rust = self.struct_names[&(class.to_string(), name.to_string())].clone();
            return Ok(Some(Kind::Struct { rust }));
        }
        Ok(None)
    }

    fn resolve_in(
        &self,
        class: Option<&str>,
        name: &str,
        depth: u32,
        original: &str,
    ) -> Result<Kind, Error> {
        match class {
            Some(c) => self
                .try_class(c, name, depth)?
                .ok_or_else(|| Error::Spec(format!("unknown type {original}"))),
            None => {
                if let Some(d) = self.domain(None, name) {
                    return self.domain_kind(d, depth);
                }
                if name == "bit" {
                    return Ok(Kind::Bit);
                }
                Prim::from_type_name(name)
                    .map(Kind::Prim)
                    .ok_or_else(|| Error::Spec(format!("unsupported field type {original}")))
            }
        }
    }

    fn domain_kind(&self, d: &Domain, depth: u32) -> Result<Kind, Error> {
        if d.choices.is_empty() {
            return self.resolve_depth(d.class.as_deref(), &d.ty, depth + 1);
        }
        let repr = match self.resolve_depth(d.class.as_deref(), &d.ty, depth + 1)? {
            Kind::Prim(p @ (Prim::U8 | Prim::U16)) => p,
            other => {
                return Err(Error::Spec(format!(
                    "enum domain {} has unsupported type {other:?}",
                    d.name
                )))
            }
        };
        let rust = self.enum_names[&(d.class.clone(), d.name.clone())].clone();
        Ok(Kind::Enum { rust, repr })
    }
}

pub fn all_domains(spec: &Spec) -> impl Iterator<Item = &Domain> {
    spec.domains
        .iter()
        .chain(spec.classes.iter().flat_map(|c| c.domains.iter()))
}

pub fn all_structs(spec: &Spec) -> impl Iterator<Item = &StructDef> {
    spec.classes.iter().flat_map(|c| c.structs.iter())
}
