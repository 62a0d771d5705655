//! `ferry user add|passwd|tags|remove|list`: manage ferryd's users file.
//!
//! ferryd re-reads the file when it is replaced (within a second), so changes apply to the
//! next login, and a removed user's connections are closed. Changes hold the file's change
//! lock from their load to their save, as ferryd's management API does.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use ferry_auth::{Credentials, Record, Users, DEFAULT_ITERATIONS, MIN_ITERATIONS};

use crate::ToolError;

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct UserOpts {
    /// The users file. Default: $FERRY_USERS_FILE, else $XDG_CONFIG_HOME/ferry/users
    /// (~/.config/ferry/users), where ferryd looks when started without --config or
    /// --users-file.
    #[arg(long, value_name = "FILE", global = true)]
    pub users_file: Option<PathBuf>,
    #[command(subcommand)]
    pub cmd: UserCmd,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct PasswordOpts {
    /// The user name.
    pub name: String,
    /// The password (visible to other local users in the process list: prefer the prompt or
    /// --password-stdin).
    #[arg(long, conflicts_with = "password_stdin")]
    pub password: Option<String>,
    /// Read the password from the first line of standard input.
    #[arg(long)]
    pub password_stdin: bool,
    /// PBKDF2 rounds; more is slower for attackers and for every login.
    #[arg(long, default_value_t = DEFAULT_ITERATIONS,
          value_parser = clap::value_parser!(u32).range(i64::from(MIN_ITERATIONS)..))]
    pub iterations: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct TagsOpts {
    /// The user name.
    pub name: String,
    /// Replace the user's tags with these, comma-separated (`administrator` lets the user
    /// change users through the management API; the others are for management tools).
    /// Without --set or --clear, the tags are printed.
    #[arg(long, value_delimiter = ',', conflicts_with = "clear")]
    pub set: Option<Vec<String>>,
    /// Remove all the user's tags.
    #[arg(long)]
    pub clear: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum UserCmd {
    /// Add a user (fails if it exists).
    Add(PasswordOpts),
    /// Change a user's password (fails if it does not exist).
    Passwd(PasswordOpts),
    /// Show or set a user's tags (RabbitMQ's user tags).
    Tags(TagsOpts),
    /// Remove a user.
    Remove {
        /// The user name.
        name: String,
    },
    /// List the user names.
    List,
}

pub fn command(opts: &UserOpts) -> Result<(), ToolError> {
    let path = match &opts.users_file {
        Some(p) => p.clone(),
        None => ferry_auth::default_users_file().ok_or_else(|| {
            ToolError::InvalidOptions(
                "no users file location: set --users-file, FERRY_USERS_FILE or HOME".into(),
            )
        })?,
    };
    let failed = |e: ferry_auth::UsersError| ToolError::InvalidOptions(e.to_string());
    let load = || Ok::<_, ToolError>(Users::load(&path).map_err(failed)?.unwrap_or_default());
    // The password is asked, and its keys derived (slow on purpose), before the change lock
    // is taken: a prompt must not hold up ferryd's management writes.
    let credentials = match &opts.cmd {
        UserCmd::Add(p) | UserCmd::Passwd(p) => {
            ferry_auth::validate_user_name(&p.name).map_err(failed)?;
            check_presence(&load()?, &opts.cmd, &p.name)?;
            let password = password(p)?;
            Some(Credentials::new(&password, p.iterations).map_err(|e| invalid(e.to_string()))?)
        }
        _ => None,
    };
    let changes = match &opts.cmd {
        UserCmd::List => false,
        UserCmd::Tags(t) => t.set.is_some() || t.clear,
        _ => true,
    };
    let _lock = if changes {
        Some(Users::lock_file(&path).map_err(failed)?)
    } else {
        None
    };
    let mut users = load()?;
    match &opts.cmd {
        UserCmd::List => {
            for name in users.names() {
                println!("{}", list_line(name, users.get(name)));
            }
            return Ok(());
        }
        UserCmd::Add(p) | UserCmd::Passwd(p) => {
            // Again: the file may have changed while the password was typed.
            check_presence(&users, &opts.cmd, &p.name)?;
            let Some(credentials) = credentials else {
                unreachable!("add and passwd derive credentials above");
            };
            users.insert(&p.name, credentials).map_err(failed)?;
        }
        UserCmd::Tags(t) => {
            if users.get(&t.name).is_none() {
                return Err(invalid(format!("no user {}", t.name)));
            }
            let tags = match (&t.set, t.clear) {
                (Some(tags), _) => tags.clone(),
                (None, true) => Vec::new(),
                (None, false) => {
                    println!("{}", users.tags(&t.name).join(","));
                    return Ok(());
                }
            };
            users.set_tags(&t.name, &tags).map_err(failed)?;
        }
        UserCmd::Remove { name } => {
            if !users.remove(name) {
                return Err(invalid(format!("no user {name}")));
            }
        }
    }
    users.save(&path).map_err(failed)?;
    eprintln!("{} updated", path.display());
    Ok(())
}

/// `add` needs the user absent, `passwd` present.
fn check_presence(users: &Users, cmd: &UserCmd, name: &str) -> Result<(), ToolError> {
    match (matches!(cmd, UserCmd::Add(_)), users.get(name).is_some()) {
        (true, true) => Err(invalid(format!("user {name} exists"))),
        (false, false) => Err(invalid(format!("no user {name}"))),
        _ => Ok(()),
    }
}

/// A user's name, and what their record lets them do when that is less than a password's
/// keys (users brought over from RabbitMQ).
fn list_line(name: &str, record: Option<&Record>) -> String {
    match record {
        Some(Record::Rabbit(hash)) => format!(
            "{name}\t(RabbitMQ {} hash: PLAIN logins only until `ferry user passwd {name}`)",
            hash.algorithm().label()
        ),
        _ => name.to_owned(),
    }
}

fn invalid(text: String) -> ToolError {
    ToolError::InvalidOptions(text)
}

fn password(p: &PasswordOpts) -> Result<String, ToolError> {
    let password = if let Some(pw) = &p.password {
        pw.clone()
    } else if p.password_stdin || !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| ToolError::io("reading the password", e))?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    } else {
        let first = rpassword::prompt_password(format!("Password for {}: ", p.name))
            .map_err(|e| ToolError::io("reading the password", e))?;
        let again = rpassword::prompt_password("Again: ")
            .map_err(|e| ToolError::io("reading the password", e))?;
        if first != again {
            return Err(invalid("the passwords differ".into()));
        }
        first
    };
    if password.is_empty() {
        return Err(invalid("empty password".into()));
    }
    Ok(password)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{run, Cli};
    use clap::Parser;

    fn ferry(args: &[&str]) -> Result<(), ToolError> {
        let mut all = vec!["ferry"];
        all.extend_from_slice(args);
        run(&Cli::try_parse_from(all).map_err(|e| invalid(e.to_string()))?)
    }

    /// A change waits for whoever holds the users file's change lock (ferryd's management
    /// API, between its load and its save), so that neither loses the other's edit.
    #[test]
    fn a_change_waits_for_the_change_lock() {
        let dir = std::env::temp_dir().join(format!("ferry-user-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("users");
        let f = file.to_str().unwrap().to_owned();
        let held = Users::lock_file(&file).unwrap();
        let adding = std::thread::spawn(move || {
            let args = ["user", "add", "ann", "--password", "pw", "--users-file", &f];
            ferry(&[&args[..], &["--iterations", "4096"]].concat())
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!file.exists(), "saved while the lock was held");
        drop(held);
        adding.join().unwrap().unwrap();
        assert!(Users::load(&file).unwrap().unwrap().get("ann").is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rabbitmq_hash_is_listed_as_such_and_passwd_gives_keys() {
        let dir = std::env::temp_dir().join(format!("ferry-user-rabbit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("users");
        let f = file.to_str().unwrap();
        let mut users = Users::default();
        let hash =
            ferry_auth::RabbitHash::derive(ferry_auth::RabbitAlgorithm::Sha512, [1; 4], "old");
        users.insert("peter", hash).unwrap();
        users.save(&file).unwrap();
        let users = Users::load(&file).unwrap().unwrap();
        let line = list_line("peter", users.get("peter"));
        assert!(line.starts_with("peter\t(RabbitMQ SHA-512 hash"), "{line}");
        let args = [
            "user",
            "passwd",
            "peter",
            "--password",
            "new",
            "--users-file",
            f,
        ];
        ferry(&[&args[..], &["--iterations", "4096"]].concat()).unwrap();
        let users = Users::load(&file).unwrap().unwrap();
        let record = users.get("peter").unwrap();
        assert!(record.scram().is_some() && record.verify_password("new"));
        assert_eq!(list_line("peter", Some(record)), "peter");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn add_passwd_remove_list() {
        let dir = std::env::temp_dir().join(format!("ferry-user-cmd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = dir.join("users");
        let f = file.to_str().unwrap();
        let fast = ["--iterations", "4096"];
        let add = |name, pw| {
            let mut a = vec!["user", "add", name, "--password", pw, "--users-file", f];
            a.extend_from_slice(&fast);
            ferry(&a)
        };
        add("alice", "one").unwrap();
        add("bob", "two").unwrap();
        assert!(add("alice", "again").is_err(), "adding twice");
        let users = Users::load(&file).unwrap().unwrap();
        assert!(users.get("alice").unwrap().verify_password("one"));
        ferry(&[
            "user",
            "passwd",
            "alice",
            "--password",
            "three",
            "--users-file",
            f,
            "--iterations",
            "4096",
        ])
        .unwrap();
        let users = Users::load(&file).unwrap().unwrap();
        assert!(users.get("alice").unwrap().verify_password("three"));
        assert!(ferry(&[
            "user",
            "passwd",
            "carol",
            "--password",
            "x",
            "--users-file",
            f
        ])
        .is_err());
        // Tags are set, kept by a password change, and cleared.
        ferry(&[
            "user",
            "tags",
            "alice",
            "--set",
            "administrator,monitoring",
            "--users-file",
            f,
        ])
        .unwrap();
        ferry(&["user", "tags", "alice", "--users-file", f]).unwrap();
        ferry(&[
            "user",
            "passwd",
            "alice",
            "--password",
            "four",
            "--users-file",
            f,
            "--iterations",
            "4096",
        ])
        .unwrap();
        let users = Users::load(&file).unwrap().unwrap();
        assert_eq!(users.tags("alice"), ["administrator", "monitoring"]);
        assert!(ferry(&["user", "tags", "alice", "--set", "a b", "--users-file", f]).is_err());
        assert!(ferry(&["user", "tags", "carol", "--set", "x", "--users-file", f]).is_err());
        ferry(&[
            "user",
            "tags",
            "bob",
            "--set",
            "monitoring",
            "--users-file",
            f,
        ])
        .unwrap();
        ferry(&["user", "tags", "bob", "--clear", "--users-file", f]).unwrap();
        assert!(Users::load(&file).unwrap().unwrap().tags("bob").is_empty());
        ferry(&["user", "remove", "bob", "--users-file", f]).unwrap();
        assert!(ferry(&["user", "remove", "bob", "--users-file", f]).is_err());
        ferry(&["user", "list", "--users-file", f]).unwrap();
        let users = Users::load(&file).unwrap().unwrap();
        assert_eq!(users.names().collect::<Vec<_>>(), ["alice"]);
        assert!(add("bad name", "x").is_err());
        assert!(add("empty", "").is_err());
        assert!(ferry(&["user", "add", "x", "--password", "p", "--iterations", "10"]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
