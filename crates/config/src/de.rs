//! Deserialization helpers that make the schema forgiving where YAML is ambiguous and strict
//! where a silent mistake would be expensive.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use mcpgw_core::Tool;
use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};

thread_local! {
    /// Whether a [`StringLike`] being read takes only a string (see [`with_typed_strings`]).
    static TYPED_STRINGS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `read` (a deserialization on this thread) with every [`StringLike`] taking only a
/// string: a request body is JSON, where `7` and `"7"` are different values and a client that
/// sends the one for the other has made a mistake it should hear about.
pub(crate) fn with_typed_strings<T>(read: impl FnOnce() -> T) -> T {
    /// Puts the previous setting back, also when `read` unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            TYPED_STRINGS.set(self.0);
        }
    }
    let _restore = Restore(TYPED_STRINGS.replace(true));
    read()
}

/// A string that may be written as a YAML number or boolean (`PORT: 8080`, `cpus: 1.5`): the
/// text is kept, because environment values and command arguments are strings anyway. Inside
/// [`with_typed_strings`] it takes only a string.
pub(crate) struct StringLike(pub(crate) String);

impl<'de> Deserialize<'de> for StringLike {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StringLikeVisitor;

        impl Visitor<'_> for StringLikeVisitor {
            type Value = StringLike;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                if TYPED_STRINGS.get() {
                    formatter.write_str("a string")
                } else {
                    formatter.write_str("a string or a number")
                }
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<StringLike, E> {
                Ok(StringLike(value.to_owned()))
            }

            fn visit_string<E: de::Error>(self, value: String) -> Result<StringLike, E> {
                Ok(StringLike(value))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<StringLike, E> {
                scalar_text(Unexpected::Bool(value), &self, value)
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<StringLike, E> {
                scalar_text(Unexpected::Signed(value), &self, value)
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<StringLike, E> {
                scalar_text(Unexpected::Unsigned(value), &self, value)
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<StringLike, E> {
                scalar_text(Unexpected::Float(value), &self, value)
            }
        }

        /// A number or boolean where a string belongs: its text, unless strings are typed.
        fn scalar_text<E: de::Error>(
            unexpected: Unexpected<'_>,
            expected: &StringLikeVisitor,
            value: impl ToString,
        ) -> Result<StringLike, E> {
            if TYPED_STRINGS.get() {
                Err(E::invalid_type(unexpected, expected))
            } else {
                Ok(StringLike(value.to_string()))
            }
        }

        deserializer.deserialize_any(StringLikeVisitor)
    }
}

/// A mapping that refuses a repeated key: a server declared twice is a mistake, and letting the
/// last one win would hide it.
struct UniqueMap<V>(BTreeMap<String, V>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for UniqueMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct UniqueMapVisitor<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for UniqueMapVisitor<V> {
            type Value = UniqueMap<V>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a mapping")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut entries = BTreeMap::new();
                while let Some(StringLike(key)) = access.next_key()? {
                    if entries.contains_key(&key) {
                        return Err(de::Error::custom(format_args!(
                            "duplicate key `{key}`; each key may appear once in a mapping"
                        )));
                    }
                    let value = access.next_value()?;
                    entries.insert(key, value);
                }
                Ok(UniqueMap(entries))
            }
        }

        deserializer.deserialize_map(UniqueMapVisitor(PhantomData))
    }
}

/// A mapping of unique keys; an empty value (`mcp_servers:` with nothing under it) is empty.
pub(crate) fn unique_map<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    Ok(Option::<UniqueMap<V>>::deserialize(deserializer)?
        .map(|map| map.0)
        .unwrap_or_default())
}

/// A string-to-string mapping of unique keys whose values may be written as numbers.
pub(crate) fn optional_string_map<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    Ok(
        Option::<UniqueMap<StringLike>>::deserialize(deserializer)?.map(|map| {
            map.0
                .into_iter()
                .map(|(key, value)| (key, value.0))
                .collect()
        }),
    )
}

pub(crate) fn optional_string_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    Ok(Option::<Vec<StringLike>>::deserialize(deserializer)?
        .map(|items| items.into_iter().map(|item| item.0).collect()))
}

pub(crate) fn optional_string_like<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Ok(Option::<StringLike>::deserialize(deserializer)?.map(|value| value.0))
}

/// A section written with nothing under it (`auth:`) takes its defaults.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// An optional section that is switched on by being present, even with nothing under it
/// (`discovery:` turns discovery on with its defaults).
pub(crate) fn present_section<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Some(
        Option::<T>::deserialize(deserializer)?.unwrap_or_default(),
    ))
}

/// A predefined tool as an operator writes it: the MCP `Tool` object, but with unknown keys
/// refused, so that `input_schema` (snake case) is an error instead of a silently empty schema.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ToolDefinition {
    name: String,
    title: Option<String>,
    description: Option<String>,
    input_schema: Option<serde_json::Value>,
    output_schema: Option<serde_json::Value>,
    annotations: Option<serde_json::Value>,
}

pub(crate) fn optional_tools<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<Tool>>, D::Error> {
    let Some(definitions) = Option::<Vec<ToolDefinition>>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let tools = definitions
        .into_iter()
        .map(|definition| {
            let mut tool = Tool::new(definition.name);
            tool.title = definition.title;
            tool.description = definition.description;
            if let Some(schema) = definition.input_schema {
                tool.input_schema = schema;
            }
            tool.output_schema = definition.output_schema;
            tool.annotations = definition.annotations;
            tool
        })
        .collect();
    Ok(Some(tools))
}
