//! Management's changes to the users file (see `crate::admin::users`).

use ferry_auth::{Mode, Users};

use super::AuthService;

/// Why management could not change the users.
#[derive(Debug, thiserror::Error)]
pub enum UsersChangeError {
    #[error("logins are not checked (--auth no): there are no users to change")]
    NotChecked,
    #[error("ferryd has no users file (--users-file): users cannot be changed")]
    NoFile,
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("the users file cannot be changed: {0}")]
    File(String),
}

impl AuthService {
    /// Changes the users file through `change` and puts the result in force at once.
    /// `change` gets the file as it is now, so edits made with `ferry user` are kept: both
    /// hold the file's change lock from their load to their save.
    /// While there is no file yet it gets the built-in users, so that adding a first user
    /// does not lock out the guest the caller most likely logged in as. Nothing is written
    /// when `change` changes nothing. Writes are one at a time; slow when `change` derives
    /// keys, so call it off the event loops.
    pub fn change_users<T>(
        &self,
        change: impl FnOnce(&mut Users) -> Result<T, UsersChangeError>,
    ) -> Result<T, UsersChangeError> {
        if self.mode == Mode::Open {
            return Err(UsersChangeError::NotChecked);
        }
        let path = self.users_file.as_ref().ok_or(UsersChangeError::NoFile)?;
        let _one = self.writing.lock();
        // Waits out a `ferry user` change in progress, which holds it for milliseconds.
        let _file = Users::lock_file(path).map_err(|e| UsersChangeError::File(e.to_string()))?;
        let before = match Users::load(path) {
            Ok(Some(users)) => users,
            Ok(None) => self.builtin.clone(),
            Err(e) => return Err(UsersChangeError::File(e.to_string())),
        };
        let mut users = before.clone();
        let answer = change(&mut users)?;
        if users == before {
            return Ok(answer);
        }
        // Held from the save to the re-read, so that no login re-reads the file in between
        // and takes management's deletions for someone else's.
        let mut loaded = self.loaded.lock();
        users
            .save(path)
            .map_err(|e| UsersChangeError::File(e.to_string()))?;
        // Re-reads the replaced file now, not at the next login. Management closes the
        // connections of the users it removed itself; others gone from the file (a
        // `ferry user remove` since the last read) are left for the watcher.
        let handled = |name: &str| before.get(name).is_some() && users.get(name).is_none();
        self.reload_locked(&mut loaded, handled);
        Ok(answer)
    }
}
