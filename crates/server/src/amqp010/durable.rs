//! Completion deferred to the journal. A command whose effect must be on stable storage
//! (a persistent message's record, a durable declaration, the dequeue of an accepted
//! message) completes only once the journal is durable up to its point, so the client never
//! hears "complete" of something a crash would undo. The connection asks the journal to wake
//! it for the last point its sessions wait for and completes what each wake-up made durable.

use ferry_amqp010::{Command, ErrorCode};
use ferry_core::{Broker, SyncPoint};

use super::convert::Exception;
use super::session::Session;
use super::Amqp010;
use crate::shell::Shell;

/// What a command's completion waits for, decided before the command is executed (and
/// consumed).
#[derive(Debug, Clone, Copy)]
pub(super) enum WaitsFor {
    /// Whatever it made the journal record (nothing, for most commands).
    OwnRecords,
    /// Everything journaled so far: it changed durable state whose records it cannot name.
    Journal,
    /// execution.sync: every earlier command of its session.
    EarlierCommands,
}

impl WaitsFor {
    pub(super) fn of(command: &Command) -> WaitsFor {
        match command {
            Command::MessageAccept(_)
            | Command::MessageReject(_)
            | Command::TxCommit(_)
            | Command::ExchangeDeclare(_)
            | Command::ExchangeDelete(_)
            | Command::ExchangeBind(_)
            | Command::ExchangeUnbind(_)
            | Command::QueueDeclare(_)
            | Command::QueueDelete(_)
            | Command::QueuePurge(_)
            | Command::DtxPrepare(_)
            | Command::DtxCommit(_)
            | Command::DtxRollback(_) => WaitsFor::Journal,
            Command::ExecutionSync(_) => WaitsFor::EarlierCommands,
            _ => WaitsFor::OwnRecords,
        }
    }

    /// The point the command just executed on `session` must wait for, if the journal is
    /// not there yet. Commands the journal made durable meanwhile complete first, so an
    /// execution.sync's completion means every earlier command is complete.
    pub(super) fn point(self, session: &mut Session, broker: &Broker) -> Option<SyncPoint> {
        // Without a journal nothing ever waits.
        let journal = broker.journal()?;
        let durable = journal.durable();
        session.complete_durable(durable);
        let point = session.take_needs_sync().or_else(|| match self {
            WaitsFor::OwnRecords => None,
            WaitsFor::Journal => Some(journal.appended()),
            WaitsFor::EarlierCommands => session.last_waiting_point(),
        });
        point.filter(|p| *p > durable)
    }
}

impl Amqp010 {
    /// Asks the journal to wake this connection when the last point its sessions wait for
    /// is durable: one registration per new point, one wake-up per sync at most.
    pub(super) fn request_sync_wakeup(&mut self, shell: &mut Shell) {
        let mut wanted = None;
        for &channel in &self.waiting_sessions {
            let point = self
                .channels
                .get(usize::from(channel))
                .and_then(|c| c.as_ref())
                .and_then(|c| c.session.as_ref())
                .and_then(Session::last_waiting_point);
            wanted = wanted.max(point);
        }
        shell.wake_when_durable(wanted);
    }

    /// The journal made progress: complete what it made durable. If it failed instead, the
    /// first command that can never complete fails its session with resource-limit-exceeded.
    pub(super) fn on_durable(&mut self, shell: &mut Shell) {
        let Some(journal) = shell.broker.journal().cloned() else {
            return;
        };
        let durable = journal.durable();
        let failed = journal.is_failed();
        let max_frame = self.max_frame;
        for channel in std::mem::take(&mut self.waiting_sessions) {
            let (channels, mut env) = self.split(shell);
            let Some(Some(c)) = channels.get_mut(usize::from(channel)) else {
                continue;
            };
            let Some(session) = c.session.as_mut() else {
                continue;
            };
            let sync = session.complete_durable(durable);
            session.flush_completion(env.out, max_frame, sync);
            match session.first_waiting() {
                Some(w) if failed => {
                    let e = Exception::new(
                        ErrorCode::ResourceLimitExceeded,
                        "the store failed: the message is not on stable storage",
                    );
                    session.fail(&mut env, w.id, (0, 0), e);
                }
                Some(_) => self.waiting_sessions.push(channel),
                None => {}
            }
        }
        if !failed {
            // What still waits lies beyond `durable`: registered already, or registered now.
            self.request_sync_wakeup(shell);
        }
    }
}
