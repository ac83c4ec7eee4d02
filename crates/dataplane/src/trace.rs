//! Packet trace: when armed for N packets, ethernet-input marks the next N
//! received packets (`meta.trace`) and every node appends one line per marked
//! packet. Off, it costs one branch per packet per node.

use std::collections::VecDeque;
use std::fmt;

/// Lines kept at most; older ones are discarded.
pub const TRACE_MAX_LINES: usize = 4096;

/// A per-worker bounded trace buffer.
#[derive(Default)]
pub struct Trace {
    remaining: usize,
    lines: VecDeque<String>,
    next_id: u32,
}

impl Trace {
    /// Trace the next `n` received packets.
    pub fn arm(&mut self, n: usize) {
        self.remaining = n;
    }

    /// Called by ethernet-input per packet: whether to mark this one.
    #[inline]
    pub fn take(&mut self) -> bool {
        if self.remaining == 0 {
            return false;
        }
        self.remaining -= 1;
        self.next_id = self.next_id.wrapping_add(1);
        true
    }

    #[inline]
    pub fn armed(&self) -> bool {
        self.remaining > 0
    }

    /// Appends "node: text" (allocates; only reached for traced packets).
    #[cold]
    pub fn add(&mut self, node: &str, args: fmt::Arguments<'_>) {
        if self.lines.len() >= TRACE_MAX_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(format!("{node}: {args}"));
    }

    /// Takes every line recorded so far.
    pub fn drain(&mut self) -> Vec<String> {
        self.lines.drain(..).collect()
    }

    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(|s| s.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_take_bounded() {
        let mut t = Trace::default();
        assert!(!t.take());
        t.arm(2);
        assert!(t.take() && t.take() && !t.take());
        for i in 0..TRACE_MAX_LINES + 5 {
            t.add("n", format_args!("{i}"));
        }
        let l = t.drain();
        assert_eq!(l.len(), TRACE_MAX_LINES);
        assert_eq!(l[0], "n: 5");
    }
}
