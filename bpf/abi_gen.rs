// The Rust side of a BPF program's ABI table (<program>.abi.h beside its C
// source; the format is described in bpf/include/tcpaccel_bpf.h). Included
// by the build scripts of crates/pacer and crates/lanes, which write the
// generated code to OUT_DIR, and by their tests.
//
// For every struct of the table it generates a plain Rust struct with the
// same fields and types (arrays included), its `SIZE`, `write` and `read` at
// the table's offsets, and a `#[repr(C)]` mirror whose `offset_of!`/
// `size_of` are asserted at compile time against the table. The crate's
// hand-written types convert to and from these structs by struct literal,
// so a field added, dropped, renamed or retyped in the table breaks the
// Rust build; the C program's _Static_asserts break the BPF build when its
// structs leave the table.

/// One field of the table: `F(struct, field, offset, C type)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AbiField {
    pub(crate) name: String,
    pub(crate) offset: usize,
    /// Rust scalar type (`u8`, `u16`, `u32`, `u64`, `i32`, `i64`).
    pub(crate) scalar: &'static str,
    pub(crate) scalar_size: usize,
    /// Array length, for `T[N]`.
    pub(crate) len: Option<usize>,
}

impl AbiField {
    pub(crate) fn size(&self) -> usize {
        self.scalar_size * self.len.unwrap_or(1)
    }
    fn rust_type(&self) -> String {
        match self.len {
            Some(n) => format!("[{}; {n}]", self.scalar),
            None => self.scalar.to_string(),
        }
    }
}

/// One struct of the table: `S(name, size)` and its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AbiStruct {
    pub(crate) name: String,
    pub(crate) size: usize,
    pub(crate) fields: Vec<AbiField>,
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
/// makes padding an explicit field), the last ending at the struct's size.
pub(crate) fn parse_abi(header: &str) -> Result<Vec<AbiStruct>, String> {
    let text = strip_comments(header);
    let mut structs = Vec::new();
    for s in calls(&text, "S") {
        let [name, size] = s[..] else { return Err(format!("S({}): want S(name, size)", s.join(", "))) };
        let size: usize = size.parse().map_err(|_| format!("S({name}, {size}): size is not a number"))?;
        structs.push(AbiStruct { name: name.to_string(), size, fields: Vec::new() });
    }
    if structs.is_empty() {
        return Err("no S(name, size) entry".into());
    }
    for f in calls(&text, "F") {
        let [st, name, off, ty] = f[..] else {
            return Err(format!("F({}): want F(struct, field, offset, type)", f.join(", ")));
        };
        let s = structs
            .iter_mut()
            .find(|s| s.name == st)
            .ok_or_else(|| format!("F({st}, {name}, ..): struct {st} has no S({st}, size) entry"))?;
        let offset: usize = off.parse().map_err(|_| format!("{st}.{name}: offset {off} is not a number"))?;
        let (base, len) = match ty.split_once('[') {
            Some((b, n)) => {
                let n = n.strip_suffix(']').and_then(|n| n.trim().parse().ok());
                (
                    b.trim(),
                    Some(n.ok_or_else(|| format!("{st}.{name}: array length of {ty} is not a number"))?),
                )
            }
            None => (ty, None),
        };
        let (scalar, scalar_size) =
            scalar(base).ok_or_else(|| format!("{st}.{name}: unknown type {base}"))?;
        s.fields.push(AbiField { name: name.to_string(), offset, scalar, scalar_size, len });
    }
    for s in &structs {
        let mut at = 0;
        for f in &s.fields {
            if f.offset != at {
                return Err(format!(
                    "struct {}: field {} at offset {}, but the fields before it end at {at}",
                    s.name, f.name, f.offset
                ));
            }
            at += f.size();
        }
        if at != s.size {
            return Err(format!("struct {}: the fields end at {at}, its size is {}", s.name, s.size));
        }
    }
    Ok(structs)
}

fn camel(name: &str) -> String {
    name.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

/// The Rust code for a parsed table; `origin` names the header in the doc
/// comments.
pub(crate) fn generate_abi(structs: &[AbiStruct], origin: &str) -> String {
    let mut o = String::new();
    o.push_str(&format!("// Generated from {origin} by bpf/abi_gen.rs. Do not edit.\n\n"));
    for s in structs {
        let ty = camel(&s.name);
        let size = s.size;
        o.push_str(&format!(
            "/// `struct {}` ({size} bytes), field for field as in {origin}.\n\
             #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]\npub(crate) struct {ty} {{\n",
            s.name
        ));
        for f in &s.fields {
            o.push_str(&format!("    pub(crate) {}: {},\n", f.name, f.rust_type()));
        }
        o.push_str("}\n\n");
        // The repr(C) mirror: the Rust compiler's own layout of the same
        // fields must give the table's offsets and size.
        o.push_str(&format!("#[repr(C)]\n#[allow(dead_code)]\nstruct {ty}Layout {{\n"));
        for f in &s.fields {
            o.push_str(&format!("    {}: {},\n", f.name, f.rust_type()));
        }
        o.push_str("}\n");
        o.push_str(&format!("const _: () = assert!(::core::mem::size_of::<{ty}Layout>() == {size});\n"));
        for f in &s.fields {
            o.push_str(&format!(
                "const _: () = assert!(::core::mem::offset_of!({ty}Layout, {}) == {});\n",
                f.name, f.offset
            ));
        }
        o.push_str(&format!("\nimpl {ty} {{\n    pub(crate) const SIZE: usize = {size};\n"));
        o.push_str("    /// Writes the struct into the first `SIZE` bytes of `b`.\n");
        o.push_str("    pub(crate) fn write(&self, b: &mut [u8]) {\n");
        for f in &s.fields {
            let (at, n) = (f.offset, f.scalar_size);
            match f.len {
                Some(len) if n == 1 => o.push_str(&format!(
                    "        b[{at}..{}].copy_from_slice(&self.{});\n",
                    at + len,
                    f.name
                )),
                Some(_) => o.push_str(&format!(
                    "        for (i, v) in self.{}.iter().enumerate() {{\n            \
                     b[{at} + {n} * i..{at} + {n} * (i + 1)].copy_from_slice(&v.to_ne_bytes());\n        }}\n",
                    f.name
                )),
                None => o.push_str(&format!(
                    "        b[{at}..{}].copy_from_slice(&self.{}.to_ne_bytes());\n",
                    at + n,
                    f.name
                )),
            }
        }
        o.push_str("    }\n");
        o.push_str("    /// Reads the struct from the first `SIZE` bytes of `b`.\n");
        o.push_str("    pub(crate) fn read(b: &[u8]) -> Self {\n");
        o.push_str(&format!("        let mut v = {ty}::default();\n"));
        for f in &s.fields {
            let (at, n, sc) = (f.offset, f.scalar_size, f.scalar);
            match f.len {
                Some(len) if n == 1 => {
                    o.push_str(&format!("        v.{}.copy_from_slice(&b[{at}..{}]);\n", f.name, at + len))
                }
                Some(_) => o.push_str(&format!(
                    "        for (i, x) in v.{}.iter_mut().enumerate() {{\n            \
                     let mut a = [0u8; {n}];\n            \
                     a.copy_from_slice(&b[{at} + {n} * i..{at} + {n} * (i + 1)]);\n            \
                     *x = {sc}::from_ne_bytes(a);\n        }}\n",
                    f.name
                )),
                None => o.push_str(&format!(
                    "        {{\n            let mut a = [0u8; {n}];\n            \
                     a.copy_from_slice(&b[{at}..{}]);\n            v.{} = {sc}::from_ne_bytes(a);\n        }}\n",
                    at + n,
                    f.name
                )),
            }
        }
        o.push_str("        v\n    }\n}\n\n");
    }
    o
}
