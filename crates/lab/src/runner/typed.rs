//! A scenario's parameters as one typed struct, deserialized with serde
//! from the resolved string map ([`Params::typed`]): the defaults stay
//! declared once (the [`ParamSpec`](super::scenario::ParamSpec)s that `lab
//! list` prints), and a bad value is refused naming its key, the value and
//! the form the field accepts.
//!
//! Each value is a string; a field asks for the type it wants (a number, a
//! boolean, or a string that `units` parses: rates, sizes, durations) and
//! the string is read as that.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use std::collections::btree_map;

use super::scenario::Params;

/// Why the parameters did not fit the scenario's struct.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct TypedError(String);

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
    /// A comma-separated list (`variants=a,b`), blanks dropped.
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, TypedError> {
        let items: Vec<String> =
            self.0.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        v.visit_seq(de::value::SeqDeserializer::new(items.into_iter()))
    }
    serde::forward_to_deserialize_any! {
        i8 i16 i32 char str string bytes byte_buf option unit unit_struct newtype_struct tuple
        tuple_struct map struct enum identifier ignored_any
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
