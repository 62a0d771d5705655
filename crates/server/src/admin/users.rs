//! Management's user writes (RabbitMQ's `PUT`/`DELETE /api/users/...`): they change the users
//! file, as `ferry user` does, and take effect at once. Changing a user takes what RabbitMQ
//! asks (the caller's `administrator` tag) and, with an ACL in force, its `update broker`
//! with the user's name as `name`, so that an application's login cannot take over the
//! operators' accounts.

use ferry_acl::{Action, ObjectType};
use ferry_auth::{Credentials, CredentialsError, Record, Users, DEFAULT_ITERATIONS};
use ferry_core::{Broker, ConnectionMeta};

use super::{Admin, AdminError, AdminUser};
use crate::access;
use crate::auth::{UsersChangeError, ADMINISTRATOR};

/// Closes the connections `theirs` picks ("user 'alice' {why}"); returns how many were
/// asked to close.
pub(crate) fn close_connections_of(
    broker: &Broker,
    theirs: impl Fn(&ConnectionMeta) -> bool,
    why: &str,
) -> usize {
    let connections = broker.connections();
    let mut closed = 0;
    for c in connections.list() {
        if theirs(&c.meta) && connections.close(c.id, &format!("user '{}' {why}", c.meta.user)) {
            closed += 1;
        }
    }
    closed
}

/// What a `PUT /api/users/{name}` asks for.
#[derive(Debug, Clone, Default)]
pub struct UserChange {
    /// Derived into a SCRAM-SHA-256 record (never stored as such).
    pub password: Option<String>,
    /// `password_hash` (with its `hashing_algorithm`) as [`record_of`] reads it: a record as
    /// [`UserInfo::password_hash`] shows it, for copying a user between brokers, or a
    /// password hash from RabbitMQ.
    pub record: Option<Record>,
    /// Replaces the user's tags; `None` keeps an existing user's (a new one gets none).
    pub tags: Option<Vec<String>>,
}

/// One user as management shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub tags: Vec<String>,
    /// The user's record as `password_hash` and `hashing_algorithm`; `None` for a caller
    /// who may not change users.
    pub password_hash: Option<(String, &'static str)>,
}

/// A record given as `password_hash` is checked at every login of its user: a huge
/// iteration count would hold a hashing slot for minutes per attempt.
const MAX_RECORD_ITERATIONS: u32 = 10 * DEFAULT_ITERATIONS;
/// Salts are 16 octets when ferryd makes them; anything this long is not a salt.
const MAX_RECORD_SALT: usize = 64;

impl From<UsersChangeError> for AdminError {
    fn from(e: UsersChangeError) -> AdminError {
        match e {
            UsersChangeError::NotFound(t) => AdminError::NotFound(t),
            UsersChangeError::Invalid(t) => AdminError::BadRequest(t),
            UsersChangeError::NotChecked | UsersChangeError::NoFile => {
                AdminError::BadRequest(e.to_string())
            }
            UsersChangeError::File(_) => AdminError::Unavailable(e.to_string()),
        }
    }
}

/// A `password_hash` and its `hashing_algorithm` as a users file record.
pub fn record_of(password_hash: &str, algorithm: Option<&str>) -> Result<Record, AdminError> {
    let record = Record::from_management(password_hash, algorithm).map_err(|e| {
        AdminError::BadRequest(match e {
            CredentialsError::Format => format!(
                "password_hash: {e} (ferryd takes the SCRAM-SHA-256 records its own GET \
                 /api/users shows, and RabbitMQ's SHA-256 and SHA-512 hashes)"
            ),
            _ => format!("password_hash: {e}"),
        })
    })?;
    if let Record::Scram(c) = &record {
        if c.iterations > MAX_RECORD_ITERATIONS || c.salt.len() > MAX_RECORD_SALT {
            return Err(AdminError::BadRequest(format!(
                "password_hash: at most {MAX_RECORD_ITERATIONS} iterations and a \
                 {MAX_RECORD_SALT}-octet salt"
            )));
        }
    }
    Ok(record)
}

fn invalid(e: impl std::fmt::Display) -> UsersChangeError {
    UsersChangeError::Invalid(e.to_string())
}

fn is_administrator(users: &Users, name: &str) -> bool {
    users.tags(name).iter().any(|t| t == ADMINISTRATOR)
}

fn has_administrator(users: &Users) -> bool {
    users.names().any(|n| is_administrator(users, n))
}

fn valid_name(name: &str) -> Result<(), AdminError> {
    ferry_auth::validate_user_name(name).map_err(|e| AdminError::BadRequest(e.to_string()))
}

impl Admin {
    /// The users (the built-in guest while there is no users file; none with `--auth no`).
    pub fn users(&self) -> Users {
        self.auth.users()
    }
}

impl AdminUser {
    /// The caller's tags: with `--auth no`, where anyone may do anything, `administrator`.
    pub fn tags(&self) -> Vec<String> {
        if self.admin.auth.required() {
            self.admin.users().tags(&self.user).to_vec()
        } else {
            vec![ADMINISTRATOR.to_owned()]
        }
    }

    /// The users, in name order; their records only for a caller who may change them. A
    /// caller without the administrator tag sees only themselves: RabbitMQ shows users to
    /// administrators only, and the tags would point out whose password is worth guessing.
    pub fn list_users(&self) -> Vec<UserInfo> {
        let users = self.admin.users();
        let administrator = self.is_administrator(&users);
        users
            .names()
            .filter(|name| administrator || *name == self.user)
            .map(|name| self.info(&users, name, administrator))
            .collect()
    }

    /// One user, as [`AdminUser::list_users`] would show it; another user to a caller who is
    /// not an administrator is refused.
    pub fn find_user(&self, name: &str) -> Result<Option<UserInfo>, AdminError> {
        let users = self.admin.users();
        let administrator = self.is_administrator(&users);
        if !administrator && name != self.user {
            return Err(self.not_an_administrator("see other users"));
        }
        Ok(users
            .get(name)
            .map(|_| self.info(&users, name, administrator)))
    }

    /// Whether the caller has the `administrator` tag; with `--auth no` everyone has.
    pub fn administrator(&self) -> bool {
        self.is_administrator(&self.admin.users())
    }

    /// With `--auth no` everyone is.
    fn is_administrator(&self, users: &Users) -> bool {
        !self.admin.auth.required() || is_administrator(users, &self.user)
    }

    fn not_an_administrator(&self, what: &str) -> AdminError {
        AdminError::Denied(format!(
            "user {} may not {what}: that takes the {ADMINISTRATOR} tag",
            self.user
        ))
    }

    fn info(&self, users: &Users, name: &str, administrator: bool) -> UserInfo {
        // Asked without logging: hiding a record is not refusing a request.
        let may_change = administrator
            && self
                .access
                .permits(Action::Update, ObjectType::Broker, || access::named(name));
        UserInfo {
            name: name.to_owned(),
            tags: users.tags(name).to_vec(),
            password_hash: users
                .get(name)
                .filter(|_| may_change)
                .map(Record::management_form),
        }
    }

    /// Creates or replaces a user; true if it was created. A new user needs a password or a
    /// record; an existing one keeps its password (and its tags) when the change gives none,
    /// where RabbitMQ would clear them: a tags-only PUT must not lock a user out. Slow when
    /// it derives a password's keys: call it off the event loops.
    pub fn put_user(&self, name: &str, change: UserChange) -> Result<bool, AdminError> {
        valid_name(name)?;
        self.check_change(name)?;
        let bad = |what: String| Err(AdminError::BadRequest(what));
        let record = match (&change.password, change.record) {
            (Some(_), Some(_)) => return bad("give password or password_hash, not both".into()),
            (Some(password), None) if password.is_empty() => {
                return bad("password must not be empty".into())
            }
            (Some(password), None) => Some(
                Credentials::new(password, DEFAULT_ITERATIONS)
                    .map_err(|e| AdminError::BadRequest(format!("password: {e}")))?
                    .into(),
            ),
            (None, record) => record,
        };
        let rabbit_hash = matches!(record, Some(Record::Rabbit(_)));
        let (created, had_keys) = self.change_users(|users| {
            let created = users.get(name).is_none();
            let had_keys = users.get(name).is_some_and(|r| r.scram().is_some());
            match record {
                Some(record) => {
                    users.insert(name, record).map_err(invalid)?;
                }
                None if created => {
                    return Err(UsersChangeError::Invalid(format!(
                        "user '{name}' does not exist: a new user needs a password or a \
                         password_hash"
                    )))
                }
                None => {}
            }
            if let Some(tags) = &change.tags {
                users.set_tags(name, tags).map_err(invalid)?;
            }
            Ok((created, had_keys))
        })?;
        tracing::info!(
            by = %self.user,
            "management {} user {name}",
            if created { "created" } else { "changed" }
        );
        if rabbit_hash && had_keys {
            // A weaker record, and no more SCRAM: the operator should know.
            tracing::warn!(
                by = %self.user,
                "user {name}'s SCRAM-SHA-256 keys were replaced by a RabbitMQ password hash: \
                 PLAIN logins only, until a new password"
            );
        } else if rabbit_hash {
            tracing::info!("user {name} has a RabbitMQ password hash: PLAIN logins only");
        }
        Ok(created)
    }

    /// Deletes a user, and closes its connections; an unknown user is not found.
    pub fn delete_user(&self, name: &str) -> Result<(), AdminError> {
        valid_name(name)?;
        self.check_change(name)?;
        self.change_users(|users| {
            if users.remove(name) {
                Ok(())
            } else {
                Err(UsersChangeError::NotFound(format!("no user '{name}'")))
            }
        })?;
        tracing::info!(by = %self.user, "management deleted user {name}");
        self.close_connections_of(&[name]);
        Ok(())
    }

    /// Deletes users at once (RabbitMQ's bulk delete), and closes their connections;
    /// unknown ones are passed over. All or nothing: one refused name refuses the lot.
    pub fn delete_users(&self, names: &[String]) -> Result<(), AdminError> {
        self.check_administrator()?;
        for name in names {
            valid_name(name)?;
            self.check_acl(name)?;
        }
        if names.is_empty() {
            return Ok(());
        }
        let gone: Vec<&str> = self.change_users(|users| {
            Ok(names
                .iter()
                .filter(|n| users.remove(n))
                .map(String::as_str)
                .collect())
        })?;
        tracing::info!(by = %self.user, "management deleted users {gone:?}");
        self.close_connections_of(&gone);
        Ok(())
    }

    /// Changes the users file, refusing a change that would leave nobody to log in, or
    /// nobody to change users through management when somebody could before: such an
    /// install is mended only on its host.
    fn change_users<T>(
        &self,
        change: impl FnOnce(&mut Users) -> Result<T, UsersChangeError>,
    ) -> Result<T, UsersChangeError> {
        self.admin.auth.change_users(|users| {
            let had_administrator = has_administrator(users);
            let answer = change(users)?;
            if users.is_empty() {
                return Err(invalid("the change would leave no users"));
            }
            if had_administrator && !has_administrator(users) {
                return Err(invalid(format!(
                    "the change would leave no user with the {ADMINISTRATOR} tag"
                )));
            }
            Ok(answer)
        })
    }

    /// A deleted user's connections are closed, as RabbitMQ (3.7 on) closes them: deleting
    /// a compromised account cuts it off. A password change leaves them open, as there.
    fn close_connections_of(&self, names: &[&str]) {
        let theirs = |meta: &ConnectionMeta| names.contains(&meta.user.as_str());
        close_connections_of(&self.admin.broker, theirs, "was deleted");
    }

    fn check_change(&self, name: &str) -> Result<(), AdminError> {
        self.check_administrator()?;
        self.check_acl(name)
    }

    fn check_acl(&self, name: &str) -> Result<(), AdminError> {
        Ok(self
            .access
            .check(Action::Update, ObjectType::Broker, || access::named(name))?)
    }

    /// Refuses a caller without the administrator tag before anything of their request is
    /// read, so that what they send cannot change the answer (RabbitMQ answers 403 first).
    /// The ACL's `update broker` is asked later, by the change itself.
    pub fn check_administrator(&self) -> Result<(), AdminError> {
        if self.is_administrator(&self.admin.users()) {
            Ok(())
        } else {
            Err(self.not_an_administrator("change users"))
        }
    }
}
