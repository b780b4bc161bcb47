//! A scenario's parameters as one typed struct, deserialized with serde
//! from the resolved string map ([`Params::typed`]), and a bad value refused
//! naming its key, the value and the form the field accepts.
//!
//! The struct is declared with [`scenario_params!`]: each field with its
//! default and its doc in one place, the struct's [`ScenarioParams::specs`]
//! (what `lab list` prints and `--set` is checked against) generated from
//! the same declaration, so a default lives nowhere else.
//!
//! Each value is a string; a field asks for the type it wants (a number, a
//! boolean, or a string that `units` parses: rates, sizes, durations) and
//! the string is read as that.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use std::collections::{btree_map, BTreeSet};
use std::time::Duration;
use tcpaccel_core::scale::{Dilation, Quantity, Rule, ScaleError};
use tcpaccel_core::units::{Bytes, Rate};

use super::scenario::{ParamSpec, Params};

/// A scenario's parameters as one struct, declared by [`scenario_params!`].
pub trait ScenarioParams: de::DeserializeOwned {
    /// Each field's key, default and doc, in the order declared: the one
    /// home of the defaults (`Scenario::params` returns these).
    fn specs() -> Vec<ParamSpec>;
}

/// Declares a scenario's parameters struct: per field its type, its
/// default (anything `Into<String>`, in the grammar `--set` takes) and its
/// doc, which becomes both the field's rustdoc and the text `lab list`
/// prints. Other field attributes pass through (a `Duration` field needs
/// `#[serde(with = "tcpaccel_core::units::serde_duration")]`).
///
/// ```ignore
/// scenario_params! {
///     /// The demo's parameters.
///     pub struct DemoParams {
///         rate: Rate = "300mbit" => "bottleneck rate (on the wire)",
///         #[serde(with = "tcpaccel_core::units::serde_duration")]
///         duration: Duration = "25s" => "length of each transfer",
///     }
/// }
/// ```
macro_rules! scenario_params {
    (
        $(#[$sattr:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fattr:meta])*
                $field:ident : $ty:ty = $default:expr => $doc:literal
            ),* $(,)?
        }
    ) => {
        $(#[$sattr])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        $vis struct $name {
            $(
                #[doc = $doc]
                $(#[$fattr])*
                pub $field: $ty,
            )*
        }
        impl $crate::runner::typed::ScenarioParams for $name {
            fn specs() -> Vec<$crate::runner::scenario::ParamSpec> {
                vec![$($crate::runner::scenario::ParamSpec::new(stringify!($field), $default, $doc)),*]
            }
        }
    };
}
pub(crate) use scenario_params;

/// A parameters struct whose every field follows the time dilation D by
/// a declared [`Rule`] (the lanes scenarios'), declared by
/// [`scaled_params!`].
pub trait ScaledParams: ScenarioParams + Sized {
    /// Each field's key and rule, in the order declared.
    fn rules() -> Vec<(&'static str, Rule)>;
    /// The struct in the dilated run: every field through its rule
    /// (times × D, rates and per-time coefficients ÷ D, the rest as given).
    fn dilated(&self, d: Dilation) -> Result<Self, TypedError>;
    /// Each field's value as quantities (one per entry of a list).
    fn quantities(&self) -> Vec<(&'static str, Vec<Quantity>)>;
}

/// [`scenario_params!`] with a scaling rule per field, in brackets after
/// its type (`rate: Rate [Rate] = "100mbit" => "…"`): the struct also
/// implements [`ScaledParams`], so a value is scaled by the rule declared
/// beside it and nowhere else.
macro_rules! scaled_params {
    (
        $(#[$sattr:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fattr:meta])*
                $field:ident : $ty:ty [$rule:ident] = $default:expr => $doc:literal
            ),* $(,)?
        }
    ) => {
        $crate::runner::typed::scenario_params! {
            $(#[$sattr])*
            $vis struct $name {
                $( $(#[$fattr])* $field : $ty = $default => $doc ),*
            }
        }
        impl $crate::runner::typed::ScaledParams for $name {
            fn rules() -> Vec<(&'static str, tcpaccel_core::scale::Rule)> {
                vec![$((stringify!($field), tcpaccel_core::scale::Rule::$rule)),*]
            }
            fn dilated(
                &self,
                d: tcpaccel_core::scale::Dilation,
            ) -> Result<Self, $crate::runner::typed::TypedError> {
                Ok($name {
                    $($field: $crate::runner::typed::Dilate::dilate(
                        &self.$field,
                        tcpaccel_core::scale::Rule::$rule,
                        d,
                    )
                    .map_err(|e| $crate::runner::typed::TypedError::scaling(stringify!($field), d, e))?,)*
                })
            }
            fn quantities(&self) -> Vec<(&'static str, Vec<tcpaccel_core::scale::Quantity>)> {
                vec![$((stringify!($field), $crate::runner::typed::Dilate::quantities(&self.$field))),*]
            }
        }
    };
}
pub(crate) use scaled_params;

/// A field's value under a scaling [`Rule`]: through
/// [`Quantity::dilate`], so a rule that does not fit the value's type (a
/// rate declared as a time) is an error.
pub trait Dilate: Sized {
    fn dilate(&self, rule: Rule, d: Dilation) -> Result<Self, ScaleError>;
    fn quantities(&self) -> Vec<Quantity>;
}

/// A type read as one [`Quantity`] and back.
macro_rules! dilate_as {
    ($ty:ty, $q:ident, $to:expr, $from:expr) => {
        impl Dilate for $ty {
            fn dilate(&self, rule: Rule, d: Dilation) -> Result<Self, ScaleError> {
                let to: fn(&$ty) -> Quantity = $to;
                let from: fn(Quantity) -> Option<$ty> = $from;
                let kind = to(self);
                from(kind.dilate(rule, d)?)
                    .ok_or(ScaleError::Mismatch { rule: rule.name(), kind: stringify!($q) })
            }
            fn quantities(&self) -> Vec<Quantity> {
                let to: fn(&$ty) -> Quantity = $to;
                vec![to(self)]
            }
        }
    };
}

dilate_as!(Duration, Time, |t| Quantity::Time(*t), |q| match q {
    Quantity::Time(t) => Some(t),
    _ => None,
});
dilate_as!(Rate, Rate, |r| Quantity::Rate(*r), |q| match q {
    Quantity::Rate(r) => Some(r),
    _ => None,
});
dilate_as!(Bytes, Bytes, |b| Quantity::Bytes(*b), |q| match q {
    Quantity::Bytes(b) => Some(b),
    _ => None,
});
dilate_as!(f64, Number, |x| Quantity::Number(*x), |q| match q {
    Quantity::Number(x) => Some(x),
    _ => None,
});
dilate_as!(u32, Count, |n| Quantity::Count(u64::from(*n)), |q| match q {
    Quantity::Count(n) => u32::try_from(n).ok(),
    _ => None,
});
dilate_as!(Dilation, Count, |d| Quantity::Count(u64::from(d.get())), |q| match q {
    Quantity::Count(n) => u32::try_from(n).ok().and_then(|n| Dilation::new(n).ok()),
    _ => None,
});

/// A list: each entry by the rule.
impl<T: Dilate> Dilate for Vec<T> {
    fn dilate(&self, rule: Rule, d: Dilation) -> Result<Self, ScaleError> {
        self.iter().map(|x| x.dilate(rule, d)).collect()
    }
    fn quantities(&self) -> Vec<Quantity> {
        self.iter().flat_map(Dilate::quantities).collect()
    }
}

/// Choices and names (`Rule::Choice` only): D leaves them as they are.
macro_rules! dilate_choice {
    ($($ty:ty),* $(,)?) => {$(
        impl $crate::runner::typed::Dilate for $ty {
            fn dilate(
                &self,
                rule: tcpaccel_core::scale::Rule,
                d: tcpaccel_core::scale::Dilation,
            ) -> Result<Self, tcpaccel_core::scale::ScaleError> {
                let _ = d;
                match rule {
                    tcpaccel_core::scale::Rule::Choice => Ok(self.clone()),
                    _ => Err(tcpaccel_core::scale::ScaleError::Mismatch { rule: rule.name(), kind: "a choice" }),
                }
            }
            fn quantities(&self) -> Vec<tcpaccel_core::scale::Quantity> {
                vec![tcpaccel_core::scale::Quantity::Text(format!("{self:?}"))]
            }
        }
    )*};
}
pub(crate) use dilate_choice;

dilate_choice!(String, bool);

/// Reads a scenario's parameters declared as several structs (the lanes
/// scenarios' shared ones and each scenario's own): each struct takes its
/// keys out of the resolved map, and a key none took is refused.
pub struct Groups<'a> {
    params: &'a Params,
    left: BTreeSet<&'a str>,
}

impl<'a> Groups<'a> {
    pub fn new(params: &'a Params) -> Groups<'a> {
        Groups { params, left: params.0.keys().map(String::as_str).collect() }
    }

    /// The struct `G` from its keys.
    pub fn take<G: ScenarioParams>(&mut self) -> Result<G, TypedError> {
        let keys: Vec<&str> = G::specs().iter().map(|s| s.key).collect();
        self.left.retain(|k| !keys.contains(k));
        let part = self.params.0.iter().filter(|(k, _)| keys.contains(&k.as_str()));
        Params(part.map(|(k, v)| (k.clone(), v.clone())).collect()).typed()
    }

    /// Refuses a key no struct took.
    pub fn finish(self) -> Result<(), TypedError> {
        match self.left.first() {
            Some(k) => Err(TypedError(format!("unknown field `{k}`"))),
            None => Ok(()),
        }
    }
}

/// Checks a comma-separated choice (`variants=a,b`) read into `items`
/// against `valid`; the error names the key, the value and the valid entries.
pub fn choices(key: &str, items: &[String], valid: &[&str]) -> Result<(), TypedError> {
    match items.iter().find(|x| !valid.contains(&x.as_str())) {
        Some(bad) => Err(TypedError(format!(
            "parameter {key}={:?}: unknown entry {bad:?}; expected a comma-separated list of: {}",
            items.join(","),
            valid.join(", ")
        ))),
        None => Ok(()),
    }
}

/// `auto`, or a whole number of at least 1 (`precise_segs=auto`): what
/// `auto` stands for is the scenario's to work out ([`AutoCount::or`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum AutoCount {
    Auto,
    Count(u32),
}

impl TryFrom<String> for AutoCount {
    type Error = String;
    fn try_from(s: String) -> Result<AutoCount, String> {
        match s.trim() {
            "auto" => Ok(AutoCount::Auto),
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Ok(AutoCount::Count(n)),
                _ => Err("expected auto or a whole number of at least 1".into()),
            },
        }
    }
}

impl AutoCount {
    /// The count, with `auto` worked out by `auto`.
    pub fn or(self, auto: impl FnOnce() -> u32) -> u32 {
        match self {
            AutoCount::Auto => auto(),
            AutoCount::Count(n) => n,
        }
    }
}

/// Why the parameters did not fit the scenario's struct.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct TypedError(String);

impl TypedError {
    /// A value that `d` cannot scale by its rule.
    pub fn scaling(key: &str, d: Dilation, e: ScaleError) -> TypedError {
        TypedError(format!("parameter {key}: scaling by D = {d}: {e}"))
    }
}

impl de::Error for TypedError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        TypedError(msg.to_string())
    }
}

impl Params {
    /// The parameters as `T`. Errors name the key: "parameter rate=\"fast\":
    /// …, expected a rate with its unit, e.g. \"500mbit\"".
    pub fn typed<T: de::DeserializeOwned>(&self) -> Result<T, TypedError> {
        T::deserialize(MapDe { iter: self.0.iter(), current: None })
    }
}

struct MapDe<'a> {
    iter: btree_map::Iter<'a, String, String>,
    current: Option<(&'a String, &'a String)>,
}

impl<'de> de::Deserializer<'de> for MapDe<'_> {
    type Error = TypedError;
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_map(self)
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> MapAccess<'de> for MapDe<'_> {
    type Error = TypedError;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, TypedError> {
        match self.iter.next() {
            Some((k, v)) => {
                self.current = Some((k, v));
                let key: de::value::StrDeserializer<'_, TypedError> = k.as_str().into_deserializer();
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, TypedError> {
        let (k, v) = self.current.take().ok_or_else(|| TypedError("a value without its key".into()))?;
        seed.deserialize(Text(v)).map_err(|e| TypedError(format!("parameter {k}={v:?}: {}", e.0)))
    }
}

/// One value: a string read as whatever the field asks for.
struct Text<'a>(&'a str);

impl<'de, 'a> IntoDeserializer<'de, TypedError> for Text<'a> {
    type Deserializer = Text<'a>;
    fn into_deserializer(self) -> Text<'a> {
        self
    }
}

impl Text<'_> {
    fn parse<T: std::str::FromStr>(&self, form: &str) -> Result<T, TypedError> {
        self.0.trim().parse().map_err(|_| TypedError(format!("expected {form}")))
    }
}

impl<'de> de::Deserializer<'de> for Text<'_> {
    type Error = TypedError;
    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_str(self.0)
    }
    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        match self.0.trim() {
            "1" | "true" | "yes" | "on" => v.visit_bool(true),
            "0" | "false" | "no" | "off" => v.visit_bool(false),
            _ => Err(TypedError("expected a boolean (true/false, on/off)".into())),
        }
    }
    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_u64(self.parse("a whole number")?)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_u64(self.parse("a whole number")?)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_u64(self.parse("a whole number")?)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_u64(self.parse("a whole number")?)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_i64(self.parse("a whole number")?)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_f64(self.parse("a number")?)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_f64(self.parse("a number")?)
    }
    /// One of a fieldless enum's names (`buffers=kernel`); an unknown one
    /// is refused listing the names.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, TypedError> {
        let name: de::value::StrDeserializer<'_, TypedError> = self.0.trim().into_deserializer();
        v.visit_enum(name)
    }
    /// A comma-separated list (`variants=a,b`), blanks dropped.
    /// Each entry is read as the single values are (`sizes=2KB,64KB`).
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        let items = self.0.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Text);
        let mut seq = de::value::SeqDeserializer::new(items);
        let out = v.visit_seq(&mut seq)?;
        seq.end()?;
        Ok(out)
    }
    /// A value that is there (an `Option` field's key was given).
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        v.visit_some(self)
    }
    serde::forward_to_deserialize_any! {
        i8 i16 i32 char str string bytes byte_buf unit unit_struct newtype_struct tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tcpaccel_core::units::{Bytes, Rate};

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct P {
        rate: Rate,
        buffer: Bytes,
        #[serde(with = "tcpaccel_core::units::serde_duration")]
        rtt: Duration,
        repeats: u32,
        load: f64,
        hold: bool,
        variants: Vec<String>,
    }

    fn params(kv: &[(&str, &str)]) -> Params {
        Params(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    const GOOD: [(&str, &str); 7] = [
        ("rate", "500mbit"),
        ("buffer", "1MB"),
        ("rtt", "100ms"),
        ("repeats", "3"),
        ("load", "0.5"),
        ("hold", "on"),
        ("variants", "a, b,"),
    ];

    #[test]
    fn strings_become_the_fields_types() {
        let p: P = params(&GOOD).typed().unwrap();
        assert_eq!(
            p,
            P {
                rate: Rate::mbps(500),
                buffer: Bytes(1_000_000),
                rtt: Duration::from_millis(100),
                repeats: 3,
                load: 0.5,
                hold: true,
                variants: vec!["a".into(), "b".into()],
            }
        );
    }

    scenario_params! {
        /// Fields of each kind a scenario declares.
        struct Declared {
            sizes: Vec<Bytes> = "2KB, 1MiB" => "entries read as single values are",
            segs: AutoCount = "auto" => "auto or a count",
            mode: Mode = "fast" => "a fieldless enum by name",
            counts: Vec<u32> = String::from("1,2") => "whole numbers",
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Fast,
        Slow,
    }

    #[test]
    fn the_declared_defaults_are_the_specs_and_read_back_typed() {
        let specs = Declared::specs();
        let keys: Vec<(&str, &str, &str)> =
            specs.iter().map(|s| (s.key, s.default.as_str(), s.doc)).collect();
        assert_eq!(
            keys,
            [
                ("sizes", "2KB, 1MiB", "entries read as single values are"),
                ("segs", "auto", "auto or a count"),
                ("mode", "fast", "a fieldless enum by name"),
                ("counts", "1,2", "whole numbers"),
            ]
        );
        let p = Params(specs.iter().map(|s| (s.key.to_string(), s.default.clone())).collect());
        let d: Declared = p.typed().unwrap();
        assert_eq!(
            d,
            Declared {
                sizes: vec![Bytes(2000), Bytes(1 << 20)],
                segs: AutoCount::Auto,
                mode: Mode::Fast,
                counts: vec![1, 2]
            }
        );
        assert_eq!(d.segs.or(|| 7), 7);
        let with = |k: &str, v: &str| {
            let mut q = p.clone();
            q.0.insert(k.into(), v.into());
            q.typed::<Declared>()
        };
        assert_eq!(with("segs", " 3 ").unwrap().segs.or(|| 7), 3);
        assert_eq!(with("mode", "slow").unwrap().mode, Mode::Slow);
        let e = with("mode", "warp").unwrap_err().to_string();
        assert_eq!(e, "parameter mode=\"warp\": unknown variant `warp`, expected `fast` or `slow`");
        let e = with("segs", "0").unwrap_err().to_string();
        assert_eq!(e, "parameter segs=\"0\": expected auto or a whole number of at least 1");
        let e = with("counts", "1,two").unwrap_err().to_string();
        assert_eq!(e, "parameter counts=\"1,two\": expected a whole number");
        let e = with("sizes", "1MB,big").unwrap_err().to_string();
        assert!(e.starts_with("parameter sizes=\"1MB,big\": cannot parse size \"big\""), "{e}");
        let v: Vec<String> = vec!["a".into(), "x".into()];
        assert_eq!(
            choices("variants", &v, &["a", "b"]).unwrap_err().to_string(),
            "parameter variants=\"a,x\": unknown entry \"x\"; expected a comma-separated list of: a, b"
        );
        assert!(choices("variants", &v[..1], &["a", "b"]).is_ok());
    }

    scaled_params! {
        /// Fields with their scaling rules.
        struct Scaled {
            #[serde(with = "tcpaccel_core::units::serde_duration")]
            delay: Duration [Time] = "25us" => "a time",
            rate: Rate [Rate] = "1gbit" => "a rate",
            gammas: Vec<f64> [PerTime] = "1,4" => "per-time coefficients",
            buffer: Bytes [Bytes] = "128KB" => "bytes",
            hosts: Vec<u32> [Count] = "1,2" => "counts",
            cc: String [Choice] = "reno" => "a name",
            scale: Dilation [Factor] = "1" => "D",
        }
    }

    scaled_params! {
        /// A rule that does not fit its field's type.
        struct Misdeclared {
            rate: Rate [Time] = "1gbit" => "a rate declared as a time",
        }
    }

    #[test]
    fn a_scaled_struct_follows_its_rules_and_groups_split_the_keys() {
        let mut kv: Vec<(String, String)> =
            Scaled::specs().iter().map(|s| (s.key.to_string(), s.default.clone())).collect();
        kv.push(("rate".into(), "1gbit".into()));
        let mut p = Params(kv.into_iter().collect());
        p.0.insert("scale".into(), "4".into());
        let s: Scaled = p.typed().unwrap();
        let w = s.dilated(s.scale).unwrap();
        assert_eq!(w.delay, Duration::from_micros(100));
        assert_eq!(w.rate, Rate::mbps(250));
        assert_eq!(w.gammas, vec![0.25, 1.0]);
        assert_eq!((w.buffer, &w.hosts, w.cc.as_str(), w.scale), (s.buffer, &s.hosts, "reno", s.scale));
        let rules: Vec<&str> = Scaled::rules().iter().map(|(k, _)| *k).collect();
        assert_eq!(rules, ["delay", "rate", "gammas", "buffer", "hosts", "cc", "scale"]);
        assert_eq!(w.quantities()[2].1, vec![Quantity::Number(0.25), Quantity::Number(1.0)]);
        // A rule that does not fit is refused naming the key.
        let m: Misdeclared = Params([("rate".into(), "1gbit".into())].into()).typed().unwrap();
        let e = m.dilated(Dilation::new(2).unwrap()).unwrap_err().to_string();
        assert_eq!(e, "parameter rate: scaling by D = 2: a time ×D rule does not fit a rate");
        // Two structs from one map; a key neither takes is refused.
        p.0.insert("colour".into(), "red".into());
        p.0.insert("mode".into(), "slow".into());
        let mut g = Groups::new(&p);
        let again: Scaled = g.take().unwrap();
        assert_eq!(again, s);
        #[derive(Debug, serde::Deserialize)]
        struct JustMode {
            mode: Mode,
        }
        impl ScenarioParams for JustMode {
            fn specs() -> Vec<ParamSpec> {
                vec![ParamSpec::new("mode", "fast", "a mode")]
            }
        }
        assert_eq!(g.take::<JustMode>().unwrap().mode, Mode::Slow);
        assert_eq!(g.finish().unwrap_err().to_string(), "unknown field `colour`");
    }

    #[test]
    fn errors_name_the_key_the_value_and_the_accepted_form() {
        let with = |k: &str, v: &str| {
            let mut kv: Vec<(&str, &str)> = GOOD.iter().copied().filter(|(x, _)| *x != k).collect();
            kv.push((k, v));
            params(&kv).typed::<P>().unwrap_err().to_string()
        };
        let e = with("repeats", "three");
        assert_eq!(e, "parameter repeats=\"three\": expected a whole number");
        let e = with("load", "half");
        assert_eq!(e, "parameter load=\"half\": expected a number");
        let e = with("hold", "maybe");
        assert!(e.starts_with("parameter hold=\"maybe\": expected a boolean"), "{e}");
        let e = with("rate", "fast");
        assert!(e.starts_with("parameter rate=\"fast\": "), "{e}");
        let e = with("rtt", "soon");
        assert!(e.starts_with("parameter rtt=\"soon\": "), "{e}");
        let missing = params(&GOOD[1..]).typed::<P>().unwrap_err().to_string();
        assert!(missing.contains("missing field `rate`"), "{missing}");
        let mut extra = GOOD.to_vec();
        extra.push(("colour", "red"));
        let e = params(&extra).typed::<P>().unwrap_err().to_string();
        assert!(e.contains("unknown field `colour`"), "{e}");
    }
}
