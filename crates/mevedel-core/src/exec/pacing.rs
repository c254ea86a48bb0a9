//! When a running command's progress event is due: none in the first two
//! seconds, then at most four a second while output arrives and one per
//! whole elapsed second while it is silent.

use std::time::{Duration, Instant};

/// Quiet time before the first progress event.
pub const FIRST_AFTER: Duration = Duration::from_secs(2);
/// Shortest gap between two events (four a second).
pub const MIN_GAP: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    last: Option<Instant>,
    last_bytes: u64,
}

impl Pacer {
    pub fn new(start: Instant) -> Pacer {
        Pacer {
            start,
            last: None,
            last_bytes: 0,
        }
    }

    fn whole_seconds(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_secs()
    }

    /// Whether an event is due at NOW with BYTES of output so far; when
    /// it is, the caller sends one and the pacer counts it as sent.
    pub fn due(&mut self, now: Instant, bytes: u64) -> bool {
        if now < self.start + FIRST_AFTER {
            return false;
        }
        let due = match self.last {
            None => true,
            Some(last) if bytes != self.last_bytes => now >= last + MIN_GAP,
            Some(last) => {
                now >= last + MIN_GAP && self.whole_seconds(now) > self.whole_seconds(last)
            }
        };
        if due {
            self.last = Some(now);
            self.last_bytes = bytes;
        }
        due
    }

    /// When to check again, given BYTES of output so far.
    pub fn next_check(&self, bytes: u64) -> Instant {
        let Some(last) = self.last else {
            return self.start + FIRST_AFTER;
        };
        if bytes != self.last_bytes {
            return last + MIN_GAP;
        }
        let next_second = self.start + Duration::from_secs(self.whole_seconds(last) + 1);
        next_second.max(last + MIN_GAP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulate SECS seconds in 10 ms steps; OUTPUT(t_ms) says whether
    /// output arrives at that step. Returns the event times in ms.
    fn simulate(secs: u64, output: impl Fn(u64) -> bool) -> Vec<u64> {
        let start = Instant::now();
        let mut pacer = Pacer::new(start);
        let mut bytes = 0;
        let mut events = Vec::new();
        for ms in (0..secs * 1000).step_by(10) {
            if output(ms) {
                bytes += 1;
            }
            if pacer.due(start + Duration::from_millis(ms), bytes) {
                events.push(ms);
            }
        }
        events
    }

    #[test]
    fn nothing_in_the_first_two_seconds() {
        let events = simulate(5, |_| true);
        assert_eq!(events.first().copied(), Some(2000));
    }

    #[test]
    fn at_most_four_per_second_with_output() {
        let events = simulate(10, |_| true);
        for w in events.windows(2) {
            assert!(w[1] - w[0] >= 250, "{events:?}");
        }
        // 2.0..10.0 s at 250 ms spacing.
        assert_eq!(events.len(), 32);
    }

    #[test]
    fn once_a_second_when_silent() {
        let events = simulate(10, |ms| ms < 100);
        assert_eq!(events, vec![2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000]);
    }

    #[test]
    fn next_check_follows_the_rules() {
        let start = Instant::now();
        let mut p = Pacer::new(start);
        assert_eq!(p.next_check(0), start + FIRST_AFTER);
        assert!(p.due(start + Duration::from_millis(2100), 5));
        assert_eq!(p.next_check(9), start + Duration::from_millis(2350));
        assert_eq!(p.next_check(5), start + Duration::from_secs(3));
    }
}
