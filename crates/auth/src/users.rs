//! The users file: one `name:record` line per user (see [`Record`]), optionally
//! followed by ` tags=a,b` (RabbitMQ's user tags, kept for management tools), `#` comments.
//! Written atomically (a temporary file renamed over the old one) with mode 0600.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::credentials::CredentialsError;
use crate::record::Record;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    entries: BTreeMap<String, Record>,
    /// Only users with tags have an entry.
    tags: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("line {line}: {reason}")]
    Syntax { line: usize, reason: String },
    #[error("invalid user name {0:?}: {1}")]
    BadName(String, &'static str),
    #[error("invalid tag {0:?}: {1}")]
    BadTag(String, &'static str),
    #[error("more than {MAX_TAGS} tags")]
    TooManyTags,
}

/// Tags a user may have: RabbitMQ's few, and room for a site's own.
pub const MAX_TAGS: usize = 64;

const HEADER: &str = "# Ferry users: name:SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey \
                      (base64), or name:RABBIT-SHA-256$hash or RABBIT-SHA-512$hash (RabbitMQ's, \
                      PLAIN logins only) \
                      [tags=a,b]. Edit with `ferry user`.\n";

const TAGS: &str = "tags=";

/// Names go into SASL messages, log lines and ACL rules: no separators, blanks or control
/// characters, and a sane length.
pub fn validate_user_name(name: &str) -> Result<(), UsersError> {
    let bad = |why| Err(UsersError::BadName(name.to_owned(), why));
    if let Err(why) = plain_word(name, ':') {
        return bad(why);
    }
    if name.starts_with('#') {
        return bad("starts with '#'");
    }
    Ok(())
}

/// Tags are listed after `tags=`, separated by commas: no commas, blanks or control
/// characters in one, and a sane length.
pub fn validate_tag(tag: &str) -> Result<(), UsersError> {
    plain_word(tag, ',').map_err(|why| UsersError::BadTag(tag.to_owned(), why))
}

/// A word of the users file: not empty, at most 255 bytes, without `separator`, blanks or
/// control characters.
fn plain_word(word: &str, separator: char) -> Result<(), &'static str> {
    if word.is_empty() {
        return Err("empty");
    }
    if word.len() > 255 {
        return Err("longer than 255 bytes");
    }
    if word
        .chars()
        .any(|c| c == separator || c.is_whitespace() || c.is_control())
    {
        return Err(if separator == ':' {
            "contains ':', a blank or a control character"
        } else {
            "contains ',', a blank or a control character"
        });
    }
    Ok(())
}

impl Users {
    pub fn parse(text: &str) -> Result<Users, UsersError> {
        let mut entries = BTreeMap::new();
        let mut tags = BTreeMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let syntax = |reason: String| UsersError::Syntax {
                line: index + 1,
                reason,
            };
            let (name, rest) = line
                .split_once(':')
                .ok_or_else(|| syntax("expected name:record".into()))?;
            validate_user_name(name).map_err(|e| syntax(e.to_string()))?;
            let mut fields = rest.split_whitespace();
            let record = fields.next().unwrap_or_default();
            let parsed = Record::parse(record)
                .map_err(|e: CredentialsError| syntax(format!("user {name}: {e}")))?;
            if entries.insert(name.to_owned(), parsed).is_some() {
                return Err(syntax(format!("user {name} appears twice")));
            }
            match (fields.next(), fields.next()) {
                (None, _) => {}
                (Some(field), None) => {
                    let list = field.strip_prefix(TAGS).ok_or_else(|| {
                        syntax(format!("user {name}: expected {TAGS}... after the record"))
                    })?;
                    let list: Vec<String> = list.split(',').map(str::to_owned).collect();
                    for tag in &list {
                        validate_tag(tag).map_err(|e| syntax(format!("user {name}: {e}")))?;
                    }
                    tags.insert(name.to_owned(), list);
                }
                (Some(_), Some(extra)) => {
                    return Err(syntax(format!("user {name}: unexpected {extra:?}")));
                }
            }
        }
        Ok(Users { entries, tags })
    }

    pub fn to_text(&self) -> String {
        let mut text = String::from(HEADER);
        for (name, credentials) in &self.entries {
            text.push_str(name);
            text.push(':');
            text.push_str(&credentials.encode());
            if let Some(tags) = self.tags.get(name) {
                text.push(' ');
                text.push_str(TAGS);
                text.push_str(&tags.join(","));
            }
            text.push('\n');
        }
        text
    }

    pub fn get(&self, name: &str) -> Option<&Record> {
        self.entries.get(name)
    }

    /// Adds or replaces `name`; returns whether it existed.
    pub fn insert(&mut self, name: &str, record: impl Into<Record>) -> Result<bool, UsersError> {
        validate_user_name(name)?;
        Ok(self
            .entries
            .insert(name.to_owned(), record.into())
            .is_some())
    }

    pub fn remove(&mut self, name: &str) -> bool {
        self.tags.remove(name);
        self.entries.remove(name).is_some()
    }

    /// `name`'s tags (none for an unknown user).
    pub fn tags(&self, name: &str) -> &[String] {
        self.tags.get(name).map_or(&[], Vec::as_slice)
    }

    /// Replaces the tags of a user that exists (duplicates dropped, order kept).
    pub fn set_tags(&mut self, name: &str, tags: &[String]) -> Result<(), UsersError> {
        if !self.entries.contains_key(name) {
            return Err(UsersError::BadName(name.to_owned(), "no such user"));
        }
        if tags.len() > MAX_TAGS {
            return Err(UsersError::TooManyTags);
        }
        let mut list: Vec<String> = Vec::with_capacity(tags.len());
        for tag in tags {
            validate_tag(tag)?;
            if !list.contains(tag) {
                list.push(tag.clone());
            }
        }
        if list.is_empty() {
            self.tags.remove(name);
        } else {
            self.tags.insert(name.to_owned(), list);
        }
        Ok(())
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The iteration count most SCRAM records use: unknown users are checked at that cost,
    /// so timing does not tell them apart.
    pub fn usual_iterations(&self) -> Option<u32> {
        let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
        for c in self.entries.values().filter_map(Record::scram) {
            *counts.entry(c.iterations).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by_key(|&(iterations, n)| (n, iterations))
            .map(|(iterations, _)| iterations)
    }

    /// Takes the users file's change lock, waiting for whoever holds it: `ferry user` and
    /// ferryd's management API each hold it from their load to their save, so that neither
    /// saves over an edit the other made in between. Readers need none, as saves are
    /// atomic. An advisory lock on `.<name>.lock` beside the file, since every save replaces
    /// the file itself.
    pub fn lock_file(path: &Path) -> Result<UsersFileLock, UsersError> {
        let io = |source| UsersError::Io {
            path: path.to_owned(),
            source,
        };
        let (_, lock_path) = beside(path, "lock").map_err(io)?;
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(&lock_path).map_err(io)?;
        file.lock().map_err(io)?;
        Ok(UsersFileLock { _file: file })
    }

    /// Reads `path`; `Ok(None)` if it does not exist.
    pub fn load(path: &Path) -> Result<Option<Users>, UsersError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Users::parse(&text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(UsersError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Replaces `path` atomically: readers see the old file or the new one, never a part.
    /// A writer that loads, changes and saves holds [`Users::lock_file`] throughout.
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        let io = |source| UsersError::Io {
            path: path.to_owned(),
            source,
        };
        let (dir, tmp) = beside(path, &format!("tmp{}", std::process::id())).map_err(io)?;
        let written = (|| {
            // A leftover from a crash goes first. The file is then created anew, never
            // opened: in a directory others can write to, whatever they put at this name
            // (a link to a file of ours, say) must not be what gets the secrets.
            match std::fs::remove_file(&tmp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options.open(&tmp)?;
            file.write_all(self.to_text().as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)?;
            // The rename is durable once the directory is.
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(io)
    }
}

/// Held from a load to its save (see [`Users::lock_file`]); dropping it releases the lock.
#[derive(Debug)]
pub struct UsersFileLock {
    _file: std::fs::File,
}

/// The users file's directory (created if missing), and `.<name>.<suffix>` in it: where a
/// save writes before its rename, and the change lock.
fn beside(path: &Path, suffix: &str) -> std::io::Result<(PathBuf, PathBuf)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let name = format!(".{}.{suffix}", file_name.unwrap_or_else(|| "users".into()));
    let sibling = dir.join(name);
    Ok((dir, sibling))
}

/// Where the users file lives when no option names it: `$FERRY_USERS_FILE`, else
/// `$XDG_CONFIG_HOME/ferry/users`, else `$HOME/.config/ferry/users`.
pub fn default_users_file() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("FERRY_USERS_FILE") {
        return Some(PathBuf::from(path));
    }
    let config = var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("ferry").join("users"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::Credentials;
    use crate::rabbit::{RabbitAlgorithm, RabbitHash};
    use crate::MIN_ITERATIONS;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferry-auth-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_change_lock_is_held_until_dropped() {
        let dir = temp_dir("lock");
        let path = dir.join("users");
        let lock_path = dir.join(".users.lock");
        let other = || {
            std::fs::File::options()
                .write(true)
                .open(&lock_path)
                .unwrap()
        };
        let held = Users::lock_file(&path).unwrap();
        // The lock file, not the users file (which every save replaces).
        assert!(!path.exists());
        assert!(matches!(
            other().try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other().try_lock().unwrap();
        // Saves and loads do not need it, and it does not get in their way.
        let _held = Users::lock_file(&path).unwrap();
        Users::default().save(&path).unwrap();
        assert_eq!(Users::load(&path).unwrap(), Some(Users::default()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn saving_never_writes_through_a_planted_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("link");
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let path = dir.join("users");
        let tmp = dir.join(format!(".users.tmp{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let mut users = Users::default();
        users
            .insert("alice", Credentials::new("a", MIN_ITERATIONS).unwrap())
            .unwrap();
        users.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(Users::load(&path).unwrap(), Some(users));
        let mode = std::fs::symlink_metadata(&path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn text_round_trip() {
        let mut users = Users::default();
        let alice = Credentials::new("a", MIN_ITERATIONS).unwrap();
        assert!(!users.insert("alice", alice.clone()).unwrap());
        assert!(users
            .insert("bob", Credentials::new("b", MIN_ITERATIONS).unwrap())
            .unwrap()
            .eq(&false));
        let carol = RabbitHash::derive(RabbitAlgorithm::Sha256, [1, 2, 3, 4], "c");
        users.insert("carol", carol.clone()).unwrap();
        users.set_tags("carol", &["monitoring".into()]).unwrap();
        let parsed = Users::parse(&users.to_text()).unwrap();
        assert_eq!(parsed, users);
        assert_eq!(
            parsed.names().collect::<Vec<_>>(),
            ["alice", "bob", "carol"]
        );
        assert_eq!(parsed.get("alice"), Some(&Record::Scram(alice)));
        assert_eq!(parsed.get("carol"), Some(&Record::Rabbit(carol)));
        assert_eq!(parsed.tags("carol"), ["monitoring"]);
        assert!(users.remove("carol"));
        assert!(users.remove("alice"));
        assert!(!users.remove("alice"));
        assert_eq!(users.len(), 1);
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let good = format!(
            "x:{}\n",
            Credentials::derive("p", b"salt", MIN_ITERATIONS).encode()
        );
        let cases = [
            "# only a comment\nnocolon\n".to_string(),
            format!("{good}{good}"),
            "bad name:SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA\n".to_string(),
            "u:plain\n".to_string(),
        ];
        for text in &cases {
            assert!(
                matches!(Users::parse(text), Err(UsersError::Syntax { .. })),
                "{text}"
            );
        }
        assert!(Users::parse("# c\n\n   \n").unwrap().is_empty());
    }

    #[test]
    fn tags_follow_the_record_and_round_trip() {
        let mut users = Users::default();
        let alice = Credentials::derive("a", b"salt", MIN_ITERATIONS);
        users.insert("alice", alice.clone()).unwrap();
        users
            .insert("bob", Credentials::derive("b", b"salt", MIN_ITERATIONS))
            .unwrap();
        let tags = [
            "monitoring".to_string(),
            "policymaker".into(),
            "monitoring".into(),
        ];
        users.set_tags("alice", &tags).unwrap();
        assert_eq!(users.tags("alice"), ["monitoring", "policymaker"]);
        assert!(users.tags("bob").is_empty());
        assert!(users.tags("nobody").is_empty());
        let text = users.to_text();
        assert!(
            text.contains(&format!(
                "alice:{} tags=monitoring,policymaker\n",
                alice.encode()
            )),
            "{text}"
        );
        assert!(text.contains("bob:SCRAM"), "{text}");
        assert!(!text
            .lines()
            .any(|l| l.starts_with("bob:") && l.contains("tags")));
        assert_eq!(Users::parse(&text).unwrap(), users);
        // Clearing the tags leaves the plain line; removing the user forgets them.
        users.set_tags("alice", &[]).unwrap();
        assert!(!users
            .to_text()
            .lines()
            .any(|l| !l.starts_with('#') && l.contains("tags=")));
        users.set_tags("alice", &["x".to_string()]).unwrap();
        assert!(users.remove("alice"));
        users.insert("alice", alice).unwrap();
        assert!(users.tags("alice").is_empty());
        assert!(users.set_tags("nobody", &["x".to_string()]).is_err());
        let many: Vec<String> = (0..=MAX_TAGS).map(|i| format!("t{i}")).collect();
        assert!(matches!(
            users.set_tags("bob", &many),
            Err(UsersError::TooManyTags)
        ));
        users.set_tags("bob", &many[..MAX_TAGS]).unwrap();
        assert_eq!(users.tags("bob").len(), MAX_TAGS);
        for bad in ["", "a,b", "a b", "a\u{7}"] {
            assert!(
                matches!(
                    users.set_tags("bob", &[bad.to_string()]),
                    Err(UsersError::BadTag(..))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn damaged_tags_are_syntax_errors() {
        let record = Credentials::derive("p", b"salt", MIN_ITERATIONS).encode();
        for tail in [
            " tags=",
            " tags=a,,b",
            " monitoring",
            " tags=a tags=b",
            " tags=a x",
        ] {
            let text = format!("x:{record}{tail}\n");
            assert!(
                matches!(Users::parse(&text), Err(UsersError::Syntax { line: 1, .. })),
                "{text}"
            );
        }
        let ok = Users::parse(&format!("x:{record}   tags=a,b  \n")).unwrap();
        assert_eq!(ok.tags("x"), ["a", "b"]);
    }

    #[test]
    fn names_are_checked() {
        for bad in ["", "a b", "a:b", "a\u{7}", "#x", &"n".repeat(256)] {
            assert!(validate_user_name(bad).is_err(), "{bad:?}");
        }
        for good in ["guest", "alice@example.com", "CN=x,O=y", "ü"] {
            assert!(validate_user_name(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn usual_iterations_is_the_most_common() {
        let mut users = Users::default();
        assert_eq!(users.usual_iterations(), None);
        for (name, i) in [("a", 5000), ("b", 4096), ("c", 5000)] {
            users
                .insert(name, Credentials::derive("p", b"s", i))
                .unwrap();
        }
        // RabbitMQ's hashes have no iteration count and do not outvote the records.
        for name in ["d", "e", "f"] {
            let hash = RabbitHash::derive(RabbitAlgorithm::Sha256, [0; 4], "p");
            users.insert(name, hash).unwrap();
        }
        assert_eq!(users.usual_iterations(), Some(5000));
    }

    #[test]
    fn save_is_private_and_load_reads_it_back() {
        let dir = temp_dir("save");
        let path = dir.join("sub").join("users");
        assert!(Users::load(&path).unwrap().is_none());
        let mut users = Users::default();
        users
            .insert("alice", Credentials::derive("p", b"salt", MIN_ITERATIONS))
            .unwrap();
        users.save(&path).unwrap();
        users.save(&path).unwrap();
        assert_eq!(Users::load(&path).unwrap(), Some(users));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // No temporary files are left behind.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["users"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_file_is_an_error_not_an_empty_database() {
        let dir = temp_dir("damaged");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("users");
        std::fs::write(&path, "alice:garbage\n").unwrap();
        assert!(Users::load(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
