//! The names aggregated tools and prompts are listed under, as `tool_names` says: which prefix
//! an owner (a server, or a group) puts before its tools' own names, which names are listed
//! bare, how a name that is too long is shortened, which owner a name's prefix stands for, and
//! which names collide.
//!
//! Everything here is pure: [`ToolNaming`] holds the settings and the map from custom prefixes
//! back to their owners, and answers from nothing else.
//!
//! # Shortening
//!
//! A name longer than `max_length` characters is listed as its first `max_length - 9`
//! characters, then `_` and the first 8 hexadecimal digits of the SHA-256 digest of the whole
//! name (prefix included): exactly `max_length` characters, the same every time the same name
//! is shortened. Characters are counted and cut as characters, never inside one.
//! `github__search_repositories_by_topic_and_language_with_pagination` (65 characters) is
//! listed under `max_length: 64` as its first 55 characters, `_` and 8 hexadecimal digits. A
//! shortened name says too little to find its owner again: it is reached through the listing
//! only (the whole name still reaches the tool when its prefix names its owner).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

use mcpgw_config::{ToolNames, ToolPrefix};
use mcpgw_core::ServerId;
use sha2::{Digest, Sha256};

/// How many characters shortening appends: `_` and 8 hexadecimal digits.
pub const SHORTENED_SUFFIX_LENGTH: usize = 9;

/// The names of aggregated tools and prompts under one `tool_names` setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolNaming {
    settings: ToolNames,
    /// Custom prefix -> the owner it stands for.
    owners_by_prefix: HashMap<String, String>,
    max_length: usize,
}

/// What one upstream name becomes in a listing (see [`ToolNaming::assign`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assigned {
    /// Listed as `name`. `alias` is the whole prefixed form, when the listed name is another
    /// (bare or shortened): a call may name it too.
    Listed { name: String, alias: Option<String> },
    /// Not listed: its name is taken by a name listed before it.
    Collides(NameCollision),
    /// The owner lists this name a second time; it is listed once.
    Repeated,
}

/// Two owners' names that would be listed as one name. The first in listing order (id order)
/// keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NameCollision {
    /// The name both would have.
    pub name: String,
    /// The owner whose name is not listed.
    pub owner: String,
    /// Its own name of what is not listed.
    pub tool: String,
    /// The owner whose name keeps `name`.
    pub listed_from: String,
    /// Its own name of what keeps `name`.
    pub listed_tool: String,
}

impl ToolNaming {
    /// The naming `settings` describe. A separator left empty is the default one, and a
    /// `max_length` below the smallest a configuration allows (32) is that smallest; a
    /// configuration that was read and checked has neither.
    pub fn new(settings: ToolNames) -> Self {
        let mut settings = settings;
        if settings.separator.is_empty() {
            ToolNames::DEFAULT_SEPARATOR.clone_into(&mut settings.separator);
        }
        let owners_by_prefix = if settings.prefix == ToolPrefix::Custom {
            settings
                .prefixes
                .iter()
                .map(|(owner, prefix)| (prefix.clone(), owner.clone()))
                .collect()
        } else {
            HashMap::new()
        };
        let max_length = usize::try_from(settings.max_length)
            .unwrap_or(usize::MAX)
            .max(min_length());
        Self {
            settings,
            owners_by_prefix,
            max_length,
        }
    }

    /// The settings this naming follows.
    pub fn settings(&self) -> &ToolNames {
        &self.settings
    }

    pub fn separator(&self) -> &str {
        &self.settings.separator
    }

    /// The longest name listed, in characters.
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The prefix of `owner`'s names; `None` when names are not prefixed.
    pub fn prefix_of<'a>(&'a self, owner: &'a str) -> Option<&'a str> {
        self.settings.prefix_of(owner)
    }

    /// `owner`'s `name` in its prefixed form, whole: `{prefix}{separator}{name}`, or `name`
    /// when names are not prefixed.
    pub fn full_name(&self, owner: &str, name: &str) -> String {
        self.settings.prefixed_name(owner, name)
    }

    /// The name `owner`'s `name` is listed under when it is not listed bare: the whole
    /// prefixed form, shortened when it is too long.
    pub fn exposed(&self, owner: &str, name: &str) -> String {
        self.shorten(&self.full_name(owner, name)).into_owned()
    }

    /// The name a `name` that only `owner` exposes is listed under: bare (shortened when too
    /// long) when `unique_bare` is on and names are prefixed, else [`ToolNaming::exposed`].
    pub fn exposed_unique(&self, owner: &str, name: &str) -> String {
        if self.settings.lists_unique_bare() {
            self.shorten(name).into_owned()
        } else {
            self.exposed(owner, name)
        }
    }

    /// `name` within `max_length` (see the module's documentation).
    pub fn shorten<'a>(&self, name: &'a str) -> Cow<'a, str> {
        shorten(name, self.max_length)
    }

    /// The owner whose names start with `prefix`: the id a custom prefix was written for,
    /// else the prefix itself as an id (unless that id has a custom prefix of its own, or the
    /// prefix is no id). `None` when names are not prefixed.
    pub fn owner_of_prefix<'a>(&'a self, prefix: &'a str) -> Option<&'a str> {
        match self.settings.prefix {
            ToolPrefix::None => None,
            ToolPrefix::Custom => match self.owners_by_prefix.get(prefix) {
                Some(owner) => Some(owner.as_str()),
                None if self.settings.prefixes.contains_key(prefix) => None,
                None => Some(prefix),
            },
            ToolPrefix::Id => Some(prefix),
        }
        .filter(|owner| ServerId::parse(owner).is_ok())
    }

    /// Every way `name` reads as an owner's prefixed name: (owner, its own name), at each
    /// place the separator occurs, first place first. An id may end with the separator's
    /// first characters (`a_` before `__`), so more than one place may read; the caller
    /// picks the owner that exists. Empty when names are not prefixed.
    pub fn split<'a>(&self, name: &'a str) -> Vec<(ServerId, &'a str)> {
        if self.settings.prefix == ToolPrefix::None {
            return Vec::new();
        }
        let separator = self.separator();
        (1..name.len())
            .filter(|&at| name.is_char_boundary(at) && name[at..].starts_with(separator))
            .filter_map(|at| {
                let owner = self.owner_of_prefix(&name[..at])?;
                let id = ServerId::parse(owner).ok()?;
                Some((id, &name[at + separator.len()..]))
            })
            .collect()
    }

    /// The names of a listing: `owners` in listing order, each with its own names in its
    /// order; the answer has one [`Assigned`] per name, in the same shape. A name only one
    /// owner exposes is listed bare under `unique_bare`; when two names would be listed as
    /// one, the first keeps it and the other collides. An alias that spells a listed name, or
    /// an earlier alias, is left out (a listed name always wins).
    pub fn assign<O: AsRef<str>, N: AsRef<str>>(
        &self,
        owners: &[(O, Vec<N>)],
    ) -> Vec<Vec<Assigned>> {
        let mut exposed_by: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        if self.settings.lists_unique_bare() {
            for (owner, names) in owners {
                for name in names {
                    exposed_by
                        .entry(name.as_ref())
                        .or_default()
                        .insert(owner.as_ref());
                }
            }
        }
        // Listed name -> (owner, own name) of the one that has it.
        let mut taken: HashMap<String, (&str, &str)> = HashMap::new();
        let mut assigned: Vec<Vec<Assigned>> = Vec::with_capacity(owners.len());
        for (owner, names) in owners {
            let owner = owner.as_ref();
            let mut of_owner = Vec::with_capacity(names.len());
            for name in names {
                let name = name.as_ref();
                let unique = exposed_by.get(name).is_some_and(|owners| owners.len() == 1);
                let full = self.full_name(owner, name);
                let listed = if unique {
                    self.exposed_unique(owner, name)
                } else {
                    self.shorten(&full).into_owned()
                };
                match taken.get(&listed) {
                    Some((first_owner, first_name))
                        if *first_owner == owner && *first_name == name =>
                    {
                        of_owner.push(Assigned::Repeated);
                    }
                    Some((first_owner, first_name)) => {
                        of_owner.push(Assigned::Collides(NameCollision {
                            name: listed,
                            owner: owner.to_owned(),
                            tool: name.to_owned(),
                            listed_from: (*first_owner).to_owned(),
                            listed_tool: (*first_name).to_owned(),
                        }));
                    }
                    None => {
                        taken.insert(listed.clone(), (owner, name));
                        let alias =
                            (full != listed && self.prefix_of(owner).is_some()).then_some(full);
                        of_owner.push(Assigned::Listed {
                            name: listed,
                            alias,
                        });
                    }
                }
            }
            assigned.push(of_owner);
        }
        // Aliases yield to listed names, and to the aliases before them.
        let mut aliases: BTreeSet<String> = BTreeSet::new();
        for entry in assigned.iter_mut().flatten() {
            if let Assigned::Listed { alias, .. } = entry
                && let Some(full) = alias.take()
                && !taken.contains_key(&full)
                && aliases.insert(full.clone())
            {
                *alias = Some(full);
            }
        }
        assigned
    }
}

impl Default for ToolNaming {
    fn default() -> Self {
        Self::new(ToolNames::default())
    }
}

impl From<ToolNames> for ToolNaming {
    fn from(settings: ToolNames) -> Self {
        Self::new(settings)
    }
}

/// The smallest `max_length` (a shortened name keeps at least 23 characters of its own).
fn min_length() -> usize {
    usize::try_from(ToolNames::MAX_LENGTH.0).unwrap_or(32)
}

/// `name` within `max_length` characters: itself when it fits, else its first
/// `max_length - 9` characters, `_` and the first 8 hexadecimal digits of the SHA-256 digest
/// of the whole `name`. A `max_length` below 32 counts as 32.
pub fn shorten(name: &str, max_length: usize) -> Cow<'_, str> {
    let max_length = max_length.max(min_length());
    if name.chars().count() <= max_length {
        return Cow::Borrowed(name);
    }
    let keep = max_length - SHORTENED_SUFFIX_LENGTH;
    let cut = name
        .char_indices()
        .nth(keep)
        .map_or(name.len(), |(at, _)| at);
    let digest = Sha256::digest(name.as_bytes());
    let mut shortened = String::with_capacity(cut + SHORTENED_SUFFIX_LENGTH);
    shortened.push_str(&name[..cut]);
    shortened.push('_');
    for byte in &digest[..4] {
        shortened.push_str(&format!("{byte:02x}"));
    }
    Cow::Owned(shortened)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn naming(settings: ToolNames) -> ToolNaming {
        ToolNaming::new(settings)
    }

    fn custom(prefixes: &[(&str, &str)]) -> ToolNaming {
        naming(ToolNames {
            prefix: ToolPrefix::Custom,
            prefixes: prefixes
                .iter()
                .map(|(owner, prefix)| ((*owner).to_owned(), (*prefix).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            ..ToolNames::default()
        })
    }

    fn none() -> ToolNaming {
        naming(ToolNames {
            prefix: ToolPrefix::None,
            ..ToolNames::default()
        })
    }

    fn listed(name: &str, alias: Option<&str>) -> Assigned {
        Assigned::Listed {
            name: name.to_owned(),
            alias: alias.map(str::to_owned),
        }
    }

    fn ids(split: Vec<(ServerId, &str)>) -> Vec<(String, String)> {
        split
            .into_iter()
            .map(|(id, rest)| (id.to_string(), rest.to_owned()))
            .collect()
    }

    #[test]
    fn names_take_the_prefix_the_settings_say() {
        let prefixed = ToolNaming::default();
        assert_eq!(prefixed.exposed("math", "add"), "math__add");
        assert_eq!(prefixed.exposed_unique("math", "add"), "math__add");
        let bare = naming(ToolNames::bare());
        assert_eq!(bare.exposed("math", "add"), "math__add");
        assert_eq!(bare.exposed_unique("math", "add"), "add");
        let dotted = naming(ToolNames {
            separator: ".".to_owned(),
            ..ToolNames::default()
        });
        assert_eq!(dotted.exposed("math", "add"), "math.add");
        let custom = custom(&[("github", "gh")]);
        assert_eq!(custom.exposed("github", "search"), "gh__search");
        assert_eq!(custom.exposed("math", "add"), "math__add");
        assert_eq!(none().exposed("math", "add"), "add");
        // `unique_bare` means nothing without prefixes.
        let none_bare = naming(ToolNames {
            prefix: ToolPrefix::None,
            unique_bare: true,
            ..ToolNames::default()
        });
        assert_eq!(none_bare.exposed_unique("math", "add"), "add");
    }

    #[test]
    fn long_names_are_shortened_stably_within_the_limit() {
        let name = format!("github__{}", "search_repositories_".repeat(4));
        assert!(name.chars().count() > 64);
        let once = shorten(&name, 64);
        let again = shorten(&name, 64);
        assert_eq!(once, again, "the same name is shortened the same way");
        assert_eq!(once.chars().count(), 64);
        assert_eq!(&once[..55], &name[..55]);
        let digest = Sha256::digest(name.as_bytes());
        let expected: String = digest[..4]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        assert_eq!(&once[55..], format!("_{expected}"));
        // Names that differ after the cut stay apart.
        let other = format!("{name}x");
        assert_ne!(shorten(&other, 64), once);
        // A name that fits is itself, borrowed.
        assert!(matches!(
            shorten("math__add", 64),
            Cow::Borrowed("math__add")
        ));
        let exactly = "x".repeat(64);
        assert_eq!(shorten(&exactly, 64), exactly);
        for limit in [32, 40, 100, 128] {
            let long = "y".repeat(200);
            assert_eq!(shorten(&long, limit).chars().count(), limit, "{limit}");
        }
        // Bad input: a limit below the smallest allowed counts as the smallest.
        assert_eq!(shorten(&"z".repeat(50), 0).chars().count(), 32);
        let naming = naming(ToolNames {
            max_length: 40,
            ..ToolNames::default()
        });
        assert_eq!(naming.exposed("math", &"a".repeat(60)).chars().count(), 40);
    }

    #[test]
    fn the_documented_example_is_what_shortening_makes() {
        let naming = ToolNaming::default();
        let listed = naming.exposed(
            "github",
            "search_repositories_by_topic_and_language_with_pagination",
        );
        assert_eq!(
            listed,
            "github__search_repositories_by_topic_and_language_with__aa5ee67d"
        );
    }

    #[test]
    fn shortening_cuts_between_characters() {
        // Bad input: multi-byte characters right where the name is cut.
        let name = "é".repeat(40) + &"ß".repeat(40);
        let shortened = shorten(&name, 64);
        assert_eq!(shortened.chars().count(), 64);
        assert!(shortened.starts_with(&"é".repeat(40)));
        assert_eq!(shortened.chars().filter(|c| *c == 'ß').count(), 15);
        let emoji = "🦀".repeat(70);
        let shortened = shorten(&emoji, 32);
        assert_eq!(shortened.chars().count(), 32);
        assert!(shortened.starts_with(&"🦀".repeat(23)));
        // 64 multi-byte characters are 64 characters, not too long.
        let fits = "é".repeat(64);
        assert_eq!(shorten(&fits, 64), fits);
    }

    #[test]
    fn prefixes_resolve_to_their_owners() {
        let custom = custom(&[("github", "gh")]);
        assert_eq!(custom.owner_of_prefix("gh"), Some("github"));
        assert_eq!(custom.owner_of_prefix("math"), Some("math"));
        // An id with a custom prefix is not its own prefix.
        assert_eq!(custom.owner_of_prefix("github"), None);
        // Bad input: a prefix that is no id.
        assert_eq!(custom.owner_of_prefix("a b"), None);
        assert_eq!(custom.owner_of_prefix(""), None);
        assert_eq!(ToolNaming::default().owner_of_prefix("math"), Some("math"));
        assert_eq!(none().owner_of_prefix("math"), None);
    }

    #[test]
    fn names_split_at_every_separator_that_reads() {
        let prefixed = ToolNaming::default();
        assert_eq!(
            ids(prefixed.split("math__add")),
            [("math".to_owned(), "add".to_owned())]
        );
        // A tool name may hold the separator: the first place is the first answer.
        // (`math__a` is no id, so the second place does not read.)
        assert_eq!(
            ids(prefixed.split("math__a__b")),
            [("math".to_owned(), "a__b".to_owned())]
        );
        // An id ending with `_` before `__`: both readings, the shorter id first.
        assert_eq!(
            ids(prefixed.split("a___x")),
            [
                ("a".to_owned(), "_x".to_owned()),
                ("a_".to_owned(), "x".to_owned())
            ]
        );
        let custom = custom(&[("github", "gh")]);
        assert_eq!(
            ids(custom.split("gh__search")),
            [("github".to_owned(), "search".to_owned())]
        );
        assert!(custom.split("github__search").is_empty());
        let dotted = naming(ToolNames {
            separator: ".".to_owned(),
            ..ToolNames::default()
        });
        assert_eq!(
            ids(dotted.split("math.add")),
            [("math".to_owned(), "add".to_owned())]
        );
        // Bad input: no separator, a leading separator, unicode, and no prefixes at all.
        assert!(prefixed.split("add").is_empty());
        assert!(prefixed.split("__add").is_empty());
        assert!(prefixed.split("é__add").is_empty());
        assert!(none().split("math__add").is_empty());
    }

    #[test]
    fn a_listing_keeps_the_first_of_two_names_and_reports_the_other() {
        let owners = vec![("a", vec!["add", "sub"]), ("b", vec!["add", "mul"])];
        let assigned = none().assign(&owners);
        assert_eq!(
            assigned,
            vec![
                vec![listed("add", None), listed("sub", None)],
                vec![
                    Assigned::Collides(NameCollision {
                        name: "add".to_owned(),
                        owner: "b".to_owned(),
                        tool: "add".to_owned(),
                        listed_from: "a".to_owned(),
                        listed_tool: "add".to_owned(),
                    }),
                    listed("mul", None),
                ],
            ]
        );
        // Prefixed, the same tools do not collide.
        assert_eq!(
            ToolNaming::default().assign(&owners),
            vec![
                vec![listed("a__add", None), listed("a__sub", None)],
                vec![listed("b__add", None), listed("b__mul", None)],
            ]
        );
    }

    #[test]
    fn unique_names_are_listed_bare_with_their_prefixed_alias() {
        let owners = vec![("a", vec!["add", "sub"]), ("b", vec!["add"])];
        assert_eq!(
            naming(ToolNames::bare()).assign(&owners),
            vec![
                vec![listed("a__add", None), listed("sub", Some("a__sub"))],
                vec![listed("b__add", None)],
            ]
        );
        // A bare name that spells another's prefixed name takes it first, in id order.
        let owners = vec![
            ("a", vec!["x__add"]),
            ("x", vec!["add"]),
            ("y", vec!["add"]),
        ];
        let assigned = naming(ToolNames::bare()).assign(&owners);
        assert_eq!(assigned[0], vec![listed("x__add", Some("a__x__add"))]);
        assert!(matches!(
            &assigned[1][0],
            Assigned::Collides(collision) if collision.name == "x__add" && collision.listed_from == "a"
        ));
        assert_eq!(assigned[2], vec![listed("y__add", None)]);
    }

    #[test]
    fn shortened_names_keep_their_whole_form_as_an_alias() {
        let long = "t".repeat(70);
        let owners = vec![("math", vec![long.as_str()])];
        let assigned = ToolNaming::default().assign(&owners);
        let whole = format!("math__{long}");
        let Assigned::Listed { name, alias } = &assigned[0][0] else {
            panic!("{assigned:?}");
        };
        assert_eq!(name.chars().count(), 64);
        assert_eq!(name, &shorten(&whole, 64));
        assert_eq!(alias.as_deref(), Some(whole.as_str()));
        // Without prefixes there is no other form.
        let assigned = none().assign(&owners);
        assert!(matches!(
            &assigned[0][0],
            Assigned::Listed { alias: None, .. }
        ));
    }

    #[test]
    fn a_name_listed_twice_by_one_owner_is_listed_once_without_a_collision() {
        let owners = vec![("a", vec!["add", "add"])];
        assert_eq!(
            ToolNaming::default().assign(&owners),
            vec![vec![listed("a__add", None), Assigned::Repeated]]
        );
    }

    #[test]
    fn prefixed_forms_that_read_alike_collide_too() {
        // `a_` + `__` + `x` and `a` + `__` + `_x` spell one name.
        let owners = vec![("a", vec!["_x"]), ("a_", vec!["x"])];
        let assigned = ToolNaming::default().assign(&owners);
        assert_eq!(assigned[0], vec![listed("a___x", None)]);
        assert!(matches!(
            &assigned[1][0],
            Assigned::Collides(collision)
                if collision.owner == "a_" && collision.tool == "x" && collision.listed_from == "a"
        ));
    }

    #[test]
    fn an_empty_separator_is_the_default_one() {
        // Bad input: settings that were never checked.
        let naming = naming(ToolNames {
            separator: String::new(),
            ..ToolNames::default()
        });
        assert_eq!(naming.separator(), "__");
        assert_eq!(naming.exposed("math", "add"), "math__add");
        assert_eq!(naming.max_length(), 64);
    }
}
