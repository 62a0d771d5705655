//! 0-10 window flow control, as qpidd keeps it (`CreditWindow` in qpidd's `Credit.cpp`).
//!
//! In window mode a subscription's credit is not a balance that deliveries use up for good:
//! it is a window granted by message.flow, and what was delivered and not yet completed by
//! the client (`used`) occupies it. A transfer may go while `used + 1 <= granted` (messages)
//! and `used + size <= granted` (bytes). Completion of a transfer delivered in window mode
//! moves the window on (`used` shrinks); message.stop and message.flush clear only what was
//! granted, so transfers outstanding at a stop still count against the next grant, and
//! completing them after the stop frees room only within what is granted after it.
//!
//! An unlimited grant (0xFFFFFFFF) is never occupied, as in qpidd: `used` only counts while
//! the unit has a finite grant.

use super::consumer::UNLIMITED;

/// One unit's window: messages or bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnitWindow {
    granted: u32,
    used: u32,
}

impl UnitWindow {
    /// qpidd's `CreditBalance::grant`: 0xFFFFFFFF makes the window unlimited; a finite grant
    /// saturates one short of it, so adding up grants never turns into "unlimited".
    fn grant(&mut self, value: u32) {
        if self.granted == UNLIMITED {
            return;
        }
        self.granted = if value == UNLIMITED {
            UNLIMITED
        } else {
            self.granted.saturating_add(value).min(UNLIMITED - 1)
        };
    }

    fn consume(&mut self, value: u32) {
        if self.granted != UNLIMITED {
            self.used = self.used.saturating_add(value);
        }
    }

    /// Completions move the window on. qpidd's unsigned arithmetic would wrap below zero
    /// (completions of transfers delivered while the grant was unlimited); saturating keeps
    /// the window usable instead.
    fn moved(&mut self, value: u32) {
        if self.granted != UNLIMITED {
            self.used = self.used.saturating_sub(value);
        }
    }

    /// What may still go out.
    fn remaining(&self) -> u32 {
        if self.granted == UNLIMITED {
            UNLIMITED
        } else {
            self.granted.saturating_sub(self.used)
        }
    }
}

/// A consumer's window in both units.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    messages: UnitWindow,
    bytes: UnitWindow,
}

impl Window {
    pub(crate) fn grant(&mut self, messages: u32, bytes: u32) {
        if messages > 0 {
            self.messages.grant(messages);
        }
        if bytes > 0 {
            self.bytes.grant(bytes);
        }
    }

    /// One delivery of `size` bytes went out in the window.
    pub(crate) fn consume(&mut self, size: u32) {
        self.messages.consume(1);
        self.bytes.consume(size);
    }

    /// The client completed `messages` transfers of `bytes` delivered in window mode.
    pub(crate) fn moved(&mut self, messages: u32, bytes: u32) {
        self.messages.moved(messages);
        self.bytes.moved(bytes);
    }

    /// message.stop: nothing more is granted; what is outstanding stays outstanding.
    pub(crate) fn clear_grant(&mut self) {
        self.messages.granted = 0;
        self.bytes.granted = 0;
    }

    /// (messages, bytes) that may go out now.
    pub(crate) fn remaining(&self) -> (u32, u32) {
        (self.messages.remaining(), self.bytes.remaining())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_keeps_the_outstanding_transfers_in_the_window() {
        let mut w = Window::default();
        w.grant(5, UNLIMITED);
        for _ in 0..5 {
            w.consume(10);
        }
        assert_eq!(w.remaining(), (0, UNLIMITED));
        w.clear_grant();
        w.moved(5, 50);
        assert_eq!(w.remaining().0, 0, "completions after a stop grant nothing");
        w.grant(5, UNLIMITED);
        assert_eq!(w.remaining(), (5, UNLIMITED));
    }

    #[test]
    fn a_grant_after_stop_is_occupied_until_the_old_transfers_complete() {
        let mut w = Window::default();
        w.grant(5, UNLIMITED);
        for _ in 0..5 {
            w.consume(1);
        }
        w.clear_grant();
        w.grant(5, UNLIMITED);
        assert_eq!(w.remaining().0, 0);
        w.moved(5, 5);
        assert_eq!(w.remaining().0, 5, "the window is 5, not 10");
    }

    #[test]
    fn grants_saturate_short_of_unlimited_and_unlimited_is_never_occupied() {
        let mut w = Window::default();
        w.grant(u32::MAX - 3, 0);
        w.grant(10, 0);
        assert_eq!(w.remaining().0, UNLIMITED - 1);
        let mut u = Window::default();
        u.grant(UNLIMITED, 100);
        u.consume(60);
        assert_eq!(u.remaining(), (UNLIMITED, 40));
        u.moved(3, 0);
        u.clear_grant();
        assert_eq!(u.remaining(), (0, 0));
        u.moved(1, 60);
        u.grant(2, 100);
        assert_eq!(u.remaining(), (2, 100), "a wrap below zero is not carried");
    }
}
