//! The Rust side of a BPF program's ABI table, generated.
//!
//! A table, `<program>.abi.h` beside the program's C source (format:
//! `bpf/include/tcpaccel_bpf.h`), lists every struct the program shares with
//! user space as `S(name, size)` and its fields as
//! `F(struct, field, offset, C type)`; the C program checks its structs
//! against it with `_Static_assert`. From the same table this crate
//! generates, per struct:
//!
//! - a plain Rust struct with the same fields and types, its `SIZE`, and
//!   `write`/`read` at the table's offsets, plus a `#[repr(C)]` mirror whose
//!   `offset_of!`/`size_of` are asserted at compile time against the table;
//! - when the table names the struct's domain type (`RUST(...)`, below),
//!   the conversions both ways between the struct and that type and its
//!   `tcpaccel_sys::bpf::Plain`, so the domain type is what user space puts
//!   in and reads from the map.
//!
//! The domain mapping is declared in the table too, in lines the C program
//! never expands (inside a `#define <PROGRAM>_RUST(...)` list), one line
//! per exception to "same field name, same type":
//!
//! | line | meaning |
//! |------|---------|
//! | `PUB(s)` | the generated struct itself is the domain type: public, with its `Plain` |
//! | `RUST(s, path)` | struct `s` converts to and from the Rust type `path`, field by field |
//! | `RUST(s, path, default)` | the same; the Rust fields not in the table take their `Default` on read |
//! | `NEST(s, field, path, first, last)` | the C fields `first..=last` are the fields of the Rust field `field: path` |
//! | `AS_BOOL(s, f)` | the C integer `f` is a `bool` (0/1) in Rust |
//! | `AS_BE(s, f)` | the C bytes `f` (`__u8[2]`, `[4]`, `[8]`) are an integer in network order in Rust |
//! | `PAD(s, f)` | `f` is padding: written as zeros, not in the Rust type |
//! | `RENAME(s, f, name)` | the C field `f` is `name` in Rust |
//! | `WITH(s, f, path)` | converted by `path::to_abi(&T) -> C` and `path::from_abi(C) -> T` |
//!
//! The conversions destructure the domain type without `..` (except under
//! `default`) and build it by struct literal, so a field that the table and
//! the Rust type do not both have is a compile error in the crate, as a
//! struct that leaves the table is one in the C program. Adding a field is
//! one `F(...)` line, the C struct's field, and the domain type's field.
//!
//! The generated code is committed beside the table (`<program>.abi.rs`),
//! the crate `include!`s it, and its build script fails when the committed
//! file is not what the table generates ([`check_generated`]); refresh it
//! with `cargo run -p tcpaccel-bpf-abi-gen -- --write`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Why a table cannot be used, naming the entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TableError(String);

fn err<T>(msg: impl Into<String>) -> Result<T, TableError> {
    Err(TableError(msg.into()))
}

/// One field of the table: `F(struct, field, offset, C type)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbiField {
    pub name: String,
    pub offset: usize,
    /// Rust scalar type (`u8`, `u16`, `u32`, `u64`, `i32`, `i64`).
    pub scalar: &'static str,
    pub scalar_size: usize,
    /// Array length, for `T[N]`.
    pub len: Option<usize>,
    /// How it converts to the domain type.
    pub conv: Conv,
    /// Its name in the domain type (the C name unless renamed).
    pub rust_name: String,
}

/// How one C field becomes a field of the domain type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conv {
    /// The same type.
    Same,
    /// A 0/1 integer, a `bool`.
    Bool,
    /// Bytes in network order, an integer.
    BigEndian,
    /// Padding: zero, absent from the domain type.
    Pad,
    /// Through `path::to_abi` / `path::from_abi`.
    With(String),
}

impl AbiField {
    pub fn size(&self) -> usize {
        self.scalar_size * self.len.unwrap_or(1)
    }
    fn rust_type(&self) -> String {
        match self.len {
            Some(n) => format!("[{}; {n}]", self.scalar),
            None => self.scalar.to_string(),
        }
    }
    fn zero(&self) -> String {
        match self.len {
            Some(n) => format!("[0; {n}]"),
            None => "0".into(),
        }
    }
}

/// `NEST(struct, field, path, first, last)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nest {
    pub field: String,
    pub path: String,
    /// Indices of the first and last C field it holds.
    pub first: usize,
    pub last: usize,
}

/// The domain type of a struct: `RUST(struct, path[, default])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub path: String,
    pub default_rest: bool,
    pub nests: Vec<Nest>,
}

/// One struct of the table: `S(name, size)`, its fields and its domain type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbiStruct {
    pub name: String,
    pub size: usize,
    pub fields: Vec<AbiField>,
    pub domain: Option<Domain>,
    /// `PUB(s)`: the generated struct is public and is the domain type.
    pub public: bool,
}

impl AbiStruct {
    pub fn field(&self, name: &str) -> Option<&AbiField> {
        self.fields.iter().find(|f| f.name == name)
    }
}

fn scalar(c: &str) -> Option<(&'static str, usize)> {
    Some(match c {
        "__u8" => ("u8", 1),
        "__u16" => ("u16", 2),
        "__u32" => ("u32", 4),
        "__u64" => ("u64", 8),
        "__s32" => ("i32", 4),
        "__s64" => ("i64", 8),
        _ => return None,
    })
}

/// The arguments of every `tag(...)` that starts a line (after the
/// continuation backslashes and comments are gone).
fn calls<'a>(text: &'a str, tag: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim().trim_end_matches('\\').trim();
        if let Some(rest) = l.strip_prefix(tag).and_then(|r| r.strip_prefix('(')) {
            if let Some(inner) = rest.strip_suffix(')') {
                out.push(inner.split(',').map(str::trim).collect());
            }
        }
    }
    out
}

fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        match rest[i..].find("*/") {
            Some(j) => rest = &rest[i + j + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// Parses an ABI table and checks that it is self-consistent: every field
/// of a struct in order, each at the end of the one before (the C side
/// makes padding an explicit field), the last ending at the struct's size;
/// every mapping line naming a struct with a domain type and a field of it.
pub fn parse_table(header: &str) -> Result<Vec<AbiStruct>, TableError> {
    let text = strip_comments(header);
    let mut structs = Vec::new();
    for s in calls(&text, "S") {
        let [name, size] = s[..] else { return err(format!("S({}): want S(name, size)", s.join(", "))) };
        let Ok(size) = size.parse() else { return err(format!("S({name}, {size}): size is not a number")) };
        structs.push(AbiStruct {
            name: name.to_string(),
            size,
            fields: Vec::new(),
            domain: None,
            public: false,
        });
    }
    if structs.is_empty() {
        return err("no S(name, size) entry");
    }
    fn get<'s>(structs: &'s mut [AbiStruct], st: &str, line: &str) -> Result<&'s mut AbiStruct, TableError> {
        match structs.iter_mut().find(|s| s.name == st) {
            Some(s) => Ok(s),
            None => err(format!("{line}: struct {st} has no S({st}, size) entry")),
        }
    }
    for f in calls(&text, "F") {
        let [st, name, off, ty] = f[..] else {
            return err(format!("F({}): want F(struct, field, offset, type)", f.join(", ")));
        };
        let s = get(&mut structs, st, &format!("F({st}, {name}, ..)"))?;
        let Ok(offset) = off.parse() else {
            return err(format!("{st}.{name}: offset {off} is not a number"));
        };
        let (base, len) = match ty.split_once('[') {
            Some((b, n)) => match n.strip_suffix(']').and_then(|n| n.trim().parse().ok()) {
                Some(n) => (b.trim(), Some(n)),
                None => return err(format!("{st}.{name}: array length of {ty} is not a number")),
            },
            None => (ty, None),
        };
        let Some((scalar, scalar_size)) = scalar(base) else {
            return err(format!("{st}.{name}: unknown type {base}"));
        };
        s.fields.push(AbiField {
            name: name.to_string(),
            offset,
            scalar,
            scalar_size,
            len,
            conv: Conv::Same,
            rust_name: name.to_string(),
        });
    }
    for s in &structs {
        let mut at = 0;
        for f in &s.fields {
            if f.offset != at {
                return err(format!(
                    "struct {}: field {} at offset {}, but the fields before it end at {at}",
                    s.name, f.name, f.offset
                ));
            }
            at += f.size();
        }
        if at != s.size {
            return err(format!("struct {}: the fields end at {at}, its size is {}", s.name, s.size));
        }
    }
    parse_domains(&text, &mut structs)?;
    Ok(structs)
}

/// The `RUST`, `NEST` and per-field lines.
fn parse_domains(text: &str, structs: &mut [AbiStruct]) -> Result<(), TableError> {
    for r in calls(text, "RUST") {
        let (st, path, default_rest) = match r[..] {
            [st, path] => (st, path, false),
            [st, path, "default"] => (st, path, true),
            _ => {
                return err(format!(
                    "RUST({}): want RUST(struct, type) or RUST(struct, type, default)",
                    r.join(", ")
                ))
            }
        };
        let line = format!("RUST({st}, ..)");
        let Some(s) = structs.iter_mut().find(|s| s.name == st) else {
            return err(format!("{line}: struct {st} has no S({st}, size) entry"));
        };
        if s.domain.is_some() {
            return err(format!("{line}: struct {st} has two RUST lines"));
        }
        s.domain = Some(Domain { path: path.to_string(), default_rest, nests: Vec::new() });
    }
    for p in calls(text, "PUB") {
        let [st] = p[..] else { return err(format!("PUB({}): want PUB(struct)", p.join(", "))) };
        let Some(s) = structs.iter_mut().find(|s| s.name == st) else {
            return err(format!("PUB({st}): struct {st} has no S({st}, size) entry"));
        };
        if s.domain.is_some() {
            return err(format!("PUB({st}): struct {st} has a RUST line too"));
        }
        s.public = true;
    }
    // The struct with a domain type, and the index of its field `f`.
    fn field<'s>(
        structs: &'s mut [AbiStruct],
        line: &str,
        st: &str,
        f: &str,
    ) -> Result<(&'s mut AbiStruct, usize), TableError> {
        let Some(s) = structs.iter_mut().find(|s| s.name == st) else {
            return err(format!("{line}: struct {st} has no S({st}, size) entry"));
        };
        if s.domain.is_none() {
            return err(format!("{line}: struct {st} has no RUST({st}, type) line"));
        }
        match s.fields.iter().position(|x| x.name == f) {
            Some(i) => Ok((s, i)),
            None => err(format!("{line}: struct {st} has no field {f}")),
        }
    }
    for n in calls(text, "NEST") {
        let [st, name, path, first, last] = n[..] else {
            return err(format!("NEST({}): want NEST(struct, field, type, first, last)", n.join(", ")));
        };
        let line = format!("NEST({st}, {name}, ..)");
        let (_, a) = field(structs, &line, st, first)?;
        let (s, b) = field(structs, &line, st, last)?;
        if b < a {
            return err(format!("{line}: {last} comes before {first}"));
        }
        let d = s.domain.as_mut().expect("checked by field()");
        if d.nests.iter().any(|x| x.first <= b && a <= x.last) {
            return err(format!("{line}: overlaps another NEST of {st}"));
        }
        d.nests.push(Nest { field: name.to_string(), path: path.to_string(), first: a, last: b });
    }
    let per_field: [(&str, usize); 5] =
        [("AS_BOOL", 2), ("AS_BE", 2), ("PAD", 2), ("WITH", 3), ("RENAME", 3)];
    for (tag, argc) in per_field {
        for args in calls(text, tag) {
            if args.len() != argc {
                return err(format!("{tag}({}): want {argc} arguments", args.join(", ")));
            }
            let line = format!("{tag}({})", args.join(", "));
            let (s, i) = field(structs, &line, args[0], args[1])?;
            let f = &mut s.fields[i];
            if tag == "RENAME" {
                f.rust_name = args[2].to_string();
                continue;
            }
            if f.conv != Conv::Same {
                return err(format!("{line}: {}.{} already has a conversion", s.name, f.name));
            }
            f.conv = match tag {
                "AS_BOOL" if f.len.is_none() => Conv::Bool,
                "AS_BE" if f.scalar == "u8" && matches!(f.len, Some(2 | 4 | 8)) => Conv::BigEndian,
                "PAD" => Conv::Pad,
                "WITH" => Conv::With(args[2].to_string()),
                _ => return err(format!("{line}: not for a field of type {}", f.rust_type())),
            };
        }
    }
    for s in structs.iter() {
        if let Some(d) = &s.domain {
            for n in &d.nests {
                if let Some(f) = s.fields[n.first..=n.last].iter().find(|f| f.conv == Conv::Pad) {
                    return err(format!("NEST({}, {}, ..): holds the padding {}", s.name, n.field, f.name));
                }
            }
        }
    }
    Ok(())
}

fn camel(name: &str) -> String {
    name.split('_').filter(|w| !w.is_empty()).map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

/// The Rust code for a parsed table; `origin` names the table in the
/// comments.
pub fn generate(structs: &[AbiStruct], origin: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "// Generated from {origin} by crates/bpf-abi-gen. Do not edit: change the table,\n\
         // then `cargo run -p tcpaccel-bpf-abi-gen -- --write`.\n"
    );
    for s in structs {
        layout(&mut o, s, origin);
        if let Some(d) = &s.domain {
            conversions(&mut o, s, d);
        }
        if s.public {
            plain(
                &mut o,
                &camel(&s.name),
                &camel(&s.name),
                &format!("{}::write(self, out)", camel(&s.name)),
                "Self::read(b)",
            );
        }
    }
    o
}

fn layout(o: &mut String, s: &AbiStruct, origin: &str) {
    let ty = camel(&s.name);
    let size = s.size;
    let vis = if s.public { "pub" } else { "pub(crate)" };
    let _ = writeln!(
        o,
        "/// `struct {}` ({size} bytes), field for field as in {origin}.\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]\n{vis} struct {ty} {{",
        s.name
    );
    for f in &s.fields {
        let _ = writeln!(o, "    {vis} {}: {},", f.name, f.rust_type());
    }
    o.push_str("}\n\n");
    // The repr(C) mirror: the Rust compiler's own layout of the same
    // fields must give the table's offsets and size.
    let _ = writeln!(o, "#[repr(C)]\n#[allow(dead_code)]\nstruct {ty}Layout {{");
    for f in &s.fields {
        let _ = writeln!(o, "    {}: {},", f.name, f.rust_type());
    }
    o.push_str("}\n");
    let _ = writeln!(o, "const _: () = assert!(::core::mem::size_of::<{ty}Layout>() == {size});");
    for f in &s.fields {
        let _ = writeln!(
            o,
            "const _: () = assert!(::core::mem::offset_of!({ty}Layout, {}) == {});",
            f.name, f.offset
        );
    }
    let _ = writeln!(o, "\nimpl {ty} {{\n    pub(crate) const SIZE: usize = {size};");
    o.push_str("    /// Writes the struct into the first `SIZE` bytes of `b`.\n");
    o.push_str("    pub(crate) fn write(&self, b: &mut [u8]) {\n");
    for f in &s.fields {
        let (at, n) = (f.offset, f.scalar_size);
        let _ = match f.len {
            Some(len) if n == 1 => {
                writeln!(o, "        b[{at}..{}].copy_from_slice(&self.{});", at + len, f.name)
            }
            Some(_) => writeln!(
                o,
                "        for (i, v) in self.{}.iter().enumerate() {{\n            \
                 b[{at} + {n} * i..{at} + {n} * (i + 1)].copy_from_slice(&v.to_ne_bytes());\n        }}",
                f.name
            ),
            None => {
                writeln!(o, "        b[{at}..{}].copy_from_slice(&self.{}.to_ne_bytes());", at + n, f.name)
            }
        };
    }
    o.push_str("    }\n");
    o.push_str("    /// Reads the struct from the first `SIZE` bytes of `b`.\n");
    o.push_str("    pub(crate) fn read(b: &[u8]) -> Self {\n");
    let _ = writeln!(o, "        let mut v = {ty}::default();");
    for f in &s.fields {
        let (at, n, sc) = (f.offset, f.scalar_size, f.scalar);
        let _ = match f.len {
            Some(len) if n == 1 => {
                writeln!(o, "        v.{}.copy_from_slice(&b[{at}..{}]);", f.name, at + len)
            }
            Some(_) => writeln!(
                o,
                "        for (i, x) in v.{}.iter_mut().enumerate() {{\n            \
                 let mut a = [0u8; {n}];\n            \
                 a.copy_from_slice(&b[{at} + {n} * i..{at} + {n} * (i + 1)]);\n            \
                 *x = {sc}::from_ne_bytes(a);\n        }}",
                f.name
            ),
            None => writeln!(
                o,
                "        {{\n            let mut a = [0u8; {n}];\n            \
                 a.copy_from_slice(&b[{at}..{}]);\n            v.{} = {sc}::from_ne_bytes(a);\n        }}",
                at + n,
                f.name
            ),
        };
    }
    o.push_str("        v\n    }\n}\n\n");
}

/// `From` both ways between the C struct and its domain type, and the
/// domain type's `Plain`.
fn conversions(o: &mut String, s: &AbiStruct, d: &Domain) {
    let ty = camel(&s.name);
    let dom = &d.path;
    let rest = if d.default_rest { ", .." } else { "" };
    let nest_of = |i: usize| d.nests.iter().find(|n| (n.first..=n.last).contains(&i));
    // The domain type's top-level fields, in table order: plain fields and
    // nests (each once, where its first field is).
    let top: Vec<String> = s
        .fields
        .iter()
        .enumerate()
        .filter(|(_, f)| f.conv != Conv::Pad)
        .filter_map(|(i, f)| match nest_of(i) {
            Some(n) if n.first == i => Some(n.field.clone()),
            Some(_) => None,
            None => Some(f.rust_name.clone()),
        })
        .collect();
    let to_c = |f: &AbiField| -> String {
        let x = &f.rust_name;
        match &f.conv {
            Conv::Same => format!("*{x}"),
            Conv::Bool => format!("{}::from(*{x})", f.scalar),
            Conv::BigEndian => format!("{x}.to_be_bytes()"),
            Conv::Pad => f.zero(),
            Conv::With(p) => format!("{p}::to_abi({x})"),
        }
    };
    // `rust_name: value`, or the name alone when the value is the C field.
    let from_c = |f: &AbiField| -> String {
        let x = &f.name;
        let v = match &f.conv {
            Conv::Same => x.clone(),
            Conv::Bool => format!("{x} != 0"),
            Conv::BigEndian => format!("u{}::from_be_bytes({x})", 8 * f.len.unwrap_or(1)),
            Conv::Pad => unreachable!("padding has no domain field"),
            Conv::With(p) => format!("{p}::from_abi({x})"),
        };
        if v == f.rust_name {
            v
        } else {
            format!("{}: {v}", f.rust_name)
        }
    };

    // Domain -> C.
    let _ = writeln!(o, "impl ::core::convert::From<&{dom}> for {ty} {{");
    let _ = writeln!(o, "    fn from(value: &{dom}) -> {ty} {{");
    let _ = writeln!(o, "        let {dom} {{ {}{rest} }} = value;", top.join(", "));
    for n in &d.nests {
        let names: Vec<&str> = s.fields[n.first..=n.last].iter().map(|f| f.rust_name.as_str()).collect();
        let _ = writeln!(o, "        let {} {{ {} }} = {};", n.path, names.join(", "), n.field);
    }
    let _ = writeln!(o, "        {ty} {{");
    for f in &s.fields {
        let _ = writeln!(o, "            {}: {},", f.name, to_c(f));
    }
    o.push_str("        }\n    }\n}\n\n");

    // C -> domain.
    let _ = writeln!(o, "impl ::core::convert::From<{ty}> for {dom} {{");
    let _ = writeln!(o, "    fn from(value: {ty}) -> {dom} {{");
    let binds: Vec<String> = s
        .fields
        .iter()
        .map(|f| if f.conv == Conv::Pad { format!("{}: _", f.name) } else { f.name.clone() })
        .collect();
    let _ = writeln!(o, "        let {ty} {{ {} }} = value;", binds.join(", "));
    let _ = writeln!(o, "        {dom} {{");
    for (i, f) in s.fields.iter().enumerate() {
        if f.conv == Conv::Pad {
            continue;
        }
        match nest_of(i) {
            Some(n) if n.first == i => {
                let inner: Vec<String> = s.fields[n.first..=n.last].iter().map(from_c).collect();
                let _ = writeln!(o, "            {}: {} {{ {} }},", n.field, n.path, inner.join(", "));
            }
            Some(_) => {}
            None => {
                let _ = writeln!(o, "            {},", from_c(f));
            }
        }
    }
    if d.default_rest {
        o.push_str("            ..::core::default::Default::default()\n");
    }
    o.push_str("        }\n    }\n}\n\n");

    plain(o, dom, &ty, &format!("{ty}::from(self).write(out)"), &format!("{ty}::read(b).into()"));
}

/// `Plain` for `dom` through the C struct `ty`: `write` writes `self` to
/// `out`, `from_bytes` is the domain value of bytes `b`.
fn plain(o: &mut String, dom: &str, ty: &str, write: &str, from_bytes: &str) {
    let _ = writeln!(o, "impl ::tcpaccel_sys::bpf::Plain for {dom} {{");
    let _ = writeln!(o, "    const SIZE: usize = {ty}::SIZE;");
    let _ = writeln!(o, "    fn write(&self, out: &mut [u8]) {{\n        {write};\n    }}");
    let _ = writeln!(o, "    fn read(b: &[u8]) -> Self {{\n        {from_bytes}\n    }}");
    o.push_str("}\n\n");
}

/// What a round trip through the domain type must do to one struct's
/// bytes: `input` read into the domain type and written back as `output`.
/// Every field comes back byte for byte, except padding (zeros) and
/// booleans (0 or 1, as the input was zero or not). Returns what differs,
/// one line per field.
pub fn round_trip_violations(s: &AbiStruct, input: &[u8], output: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for f in &s.fields {
        let r = f.offset..f.offset + f.size();
        let (a, b) = (&input[r.clone()], &output[r]);
        let want: Vec<u8> = match f.conv {
            Conv::Pad => vec![0; f.size()],
            Conv::Bool => {
                let mut one = vec![0u8; f.size()];
                if a.iter().any(|&x| x != 0) {
                    // 1 in native byte order.
                    let i = if cfg!(target_endian = "little") { 0 } else { f.size() - 1 };
                    one[i] = 1;
                }
                one
            }
            _ => a.to_vec(),
        };
        if b != want.as_slice() {
            out.push(format!("{}.{}: {a:?} came back as {b:?}, want {want:?}", s.name, f.name));
        }
    }
    out
}

/// Test support for the crates whose structs come from a table: `bytes`
/// (exactly the size of struct `name` of `table`) read into the typed value
/// by `read` and written back by `write` over a buffer of 0xAA: every field
/// comes back as [`round_trip_violations`] wants, and the value reads back
/// equal. Panics naming what differs. `read`/`write` are the type's
/// `tcpaccel_sys::bpf::Plain` methods (this crate does not depend on sys).
pub fn assert_round_trips<T: PartialEq + std::fmt::Debug>(
    table: &str,
    name: &str,
    bytes: &[u8],
    read: fn(&[u8]) -> T,
    write: fn(&T, &mut [u8]),
) {
    let structs = parse_table(table).unwrap_or_else(|e| panic!("{e}"));
    let st =
        structs.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no struct {name} in the table"));
    assert_eq!(st.size, bytes.len(), "{name}: the table's size against the bytes given");
    let v = read(bytes);
    let mut out = vec![0xAAu8; st.size];
    write(&v, &mut out);
    let bad = round_trip_violations(st, bytes, &out);
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(read(&out), v, "{name}: the value written back reads back different");
}

/// Where the generated code of table `table` (`x.abi.h`) is committed:
/// `x.abi.rs` beside it.
pub fn generated_path(table: &Path) -> PathBuf {
    let name = table.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    table.with_file_name(format!("{}.rs", name.strip_suffix(".h").unwrap_or(name)))
}

/// The code table `table` generates; `origin` is how it is named in the
/// comments (its path from the repository root).
pub fn generate_file(table: &Path, origin: &str) -> Result<String, TableError> {
    let text = std::fs::read_to_string(table).map_err(|e| TableError(format!("{}: {e}", table.display())))?;
    let structs = parse_table(&text).map_err(|e| TableError(format!("{origin}: {e}")))?;
    Ok(generate(&structs, origin))
}

/// For a build script: fails when the committed generated file of
/// `table` (relative to the crate) is not what the table generates, naming
/// the command that refreshes it. `origin` as in [`generate_file`].
pub fn check_generated(table: &str, origin: &str) {
    let table = Path::new(table);
    let generated = generated_path(table);
    println!("cargo:rerun-if-changed={}", table.display());
    println!("cargo:rerun-if-changed={}", generated.display());
    let want = generate_file(table, origin).unwrap_or_else(|e| panic!("{e}"));
    let have = std::fs::read_to_string(&generated).unwrap_or_default();
    if have != want {
        panic!(
            "{} is not what {origin} generates (the table changed?): run \
             `cargo run -p tcpaccel-bpf-abi-gen -- --write` and commit the result",
            generated.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "S(x, 16)\nF(x, a, 0, __u32)\nF(x, b, 4, __u8[4])\nF(x, c, 8, __s64)\n";

    #[test]
    fn a_table_with_a_gap_an_overlap_or_a_wrong_size_is_refused() {
        let s = parse_table(GOOD).unwrap();
        assert_eq!(s[0].fields.iter().map(|f| f.size()).collect::<Vec<_>>(), [4, 4, 8]);
        for (bad, why) in [
            (GOOD.replace("F(x, b, 4,", "F(x, b, 5,"), "a gap"),
            (GOOD.replace("F(x, b, 4,", "F(x, b, 2,"), "an overlap"),
            (GOOD.replace("S(x, 16)", "S(x, 24)"), "fields short of the size"),
            (GOOD.replace("__s64", "__f64"), "an unknown type"),
            (GOOD.replace("F(x, c,", "F(y, c,"), "a struct without S()"),
        ] {
            assert!(parse_table(&bad).is_err(), "{why} passed");
        }
    }

    #[test]
    fn mapping_lines_are_checked_against_the_table() {
        let with = |extra: &str| parse_table(&format!("{GOOD}RUST(x, crate::X)\n{extra}"));
        let s = with("AS_BOOL(x, a)\nAS_BE(x, b)\nRENAME(x, c, see)").unwrap();
        let convs: Vec<(&Conv, &str)> = s[0].fields.iter().map(|f| (&f.conv, f.rust_name.as_str())).collect();
        assert_eq!(convs, [(&Conv::Bool, "a"), (&Conv::BigEndian, "b"), (&Conv::Same, "see")]);
        let e = |extra: &str| with(extra).unwrap_err().to_string();
        assert_eq!(e("AS_BOOL(x, zz)"), "AS_BOOL(x, zz): struct x has no field zz");
        assert_eq!(e("AS_BOOL(x, b)"), "AS_BOOL(x, b): not for a field of type [u8; 4]");
        assert_eq!(e("AS_BE(x, c)"), "AS_BE(x, c): not for a field of type i64");
        assert_eq!(e("AS_BOOL(x, a)\nPAD(x, a)"), "PAD(x, a): x.a already has a conversion");
        assert_eq!(e("NEST(x, n, N, c, a)"), "NEST(x, n, ..): a comes before c");
        assert_eq!(
            e("NEST(x, n, N, a, b)\nNEST(x, m, M, b, c)"),
            "NEST(x, m, ..): overlaps another NEST of x"
        );
        assert_eq!(e("PAD(x, b)\nNEST(x, n, N, a, c)"), "NEST(x, n, ..): holds the padding b");
        assert_eq!(e("RUST(x, crate::Y)"), "RUST(x, ..): struct x has two RUST lines");
        assert_eq!(e("PUB(x)"), "PUB(x): struct x has a RUST line too");
        let e = parse_table(&format!("{GOOD}PAD(x, a)")).unwrap_err().to_string();
        assert_eq!(e, "PAD(x, a): struct x has no RUST(x, type) line");
    }

    #[test]
    fn conversions_destructure_and_build_the_domain_type_whole() {
        let s = parse_table(&format!(
            "{GOOD}RUST(x, crate::X)\nAS_BOOL(x, a)\nAS_BE(x, b)\nNEST(x, inner, crate::In, b, c)"
        ))
        .unwrap();
        let code = generate(&s, "t.abi.h");
        assert!(code.contains("let crate::X { a, inner } = value;"), "{code}");
        assert!(code.contains("let crate::In { b, c } = inner;"), "{code}");
        assert!(code.contains("a: u32::from(*a),"), "{code}");
        assert!(code.contains("b: b.to_be_bytes(),"), "{code}");
        assert!(code.contains("inner: crate::In { b: u32::from_be_bytes(b), c },"), "{code}");
        assert!(code.contains("impl ::tcpaccel_sys::bpf::Plain for crate::X {"), "{code}");
        let s = parse_table(&format!("{GOOD}RUST(x, crate::X, default)\nPAD(x, b)")).unwrap();
        let code = generate(&s, "t.abi.h");
        assert!(code.contains("let crate::X { a, c, .. } = value;"), "{code}");
        assert!(code.contains("b: [0; 4],"), "{code}");
        assert!(code.contains("let X { a, b: _, c } = value;"), "{code}");
        assert!(code.contains("..::core::default::Default::default()"), "{code}");
    }

    #[test]
    fn a_pub_struct_is_its_own_domain_type() {
        let s = parse_table(&format!("{GOOD}PUB(x)")).unwrap();
        let code = generate(&s, "t.abi.h");
        assert!(code.contains("pub struct X {\n    pub a: u32,"), "{code}");
        assert!(code.contains("impl ::tcpaccel_sys::bpf::Plain for X {"), "{code}");
        let private = generate(&parse_table(GOOD).unwrap(), "t.abi.h");
        assert!(private.contains("pub(crate) struct X {") && !private.contains("Plain"), "{private}");
    }

    #[test]
    fn round_trip_violations_name_the_field() {
        let s = parse_table(&format!("{GOOD}RUST(x, crate::X)\nAS_BOOL(x, a)\nPAD(x, b)")).unwrap();
        let input = [7, 0, 0, 0, 9, 9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8];
        let mut output = input;
        output[..8].copy_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(round_trip_violations(&s[0], &input, &output).is_empty());
        output[9] = 0;
        assert_eq!(round_trip_violations(&s[0], &input, &output).len(), 1);
        assert!(round_trip_violations(&s[0], &input, &output)[0].starts_with("x.c:"));
    }

    /// The shared round-trip check passes a faithful conversion and fails,
    /// naming the field, one that loses a field.
    #[test]
    fn assert_round_trips_catches_a_lost_field() {
        let table = format!("{GOOD}RUST(x, crate::X)\nPAD(x, b)");
        // a and c kept, b (padding) written as zeros: faithful.
        let read = |b: &[u8]| (b[..4].to_vec(), b[8..].to_vec());
        fn write(v: &(Vec<u8>, Vec<u8>), out: &mut [u8]) {
            out[..4].copy_from_slice(&v.0);
            out[4..8].fill(0);
            out[8..].copy_from_slice(&v.1);
        }
        let input: Vec<u8> = (1..=16).collect();
        assert_round_trips(&table, "x", &input, read, write);
        fn lossy(v: &(Vec<u8>, Vec<u8>), out: &mut [u8]) {
            write(v, out);
            out[8] = 0; // c's first byte lost
        }
        let lost = std::panic::catch_unwind(|| assert_round_trips(&table, "x", &input, read, lossy));
        let msg = lost.expect_err("a lost byte must fail the check");
        let msg = msg.downcast_ref::<String>().expect("a formatted panic message");
        assert!(msg.contains("x.c:"), "{msg}");
        let short = std::panic::catch_unwind(|| assert_round_trips(&table, "x", &input[..12], read, write));
        assert!(short.is_err(), "bytes of another size than the struct's");
    }

    #[test]
    fn the_generated_file_sits_beside_its_table() {
        assert_eq!(generated_path(Path::new("bpf/pace.abi.h")), Path::new("bpf/pace.abi.rs"));
    }
}
