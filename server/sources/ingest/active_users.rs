//! Active users per second from a tool's own user records, applied to a run's buckets.
//!
//! Owns [`ActiveUsers`]: a timeline of the number of active virtual users built from
//! start/end events (Gatling `USER` records) or from gauge readings (k6 `vus` points),
//! and its application to [`Bucket::active_users`](crate::domain::runs::Bucket::active_users).
//! Used by parsers whose per-request records do not carry a user count (unlike JMeter's
//! `allThreads`), so the count cannot be put on each [`Sample`](crate::domain::runs::Sample) as it
//! streams by. Must not read input itself.
//!
//! Definition: a bucket's active users = the **highest** number of active users at any
//! instant of its second `[start_ms, start_ms + 1000)`, counting the level carried into
//! the second from before it. Every bucket of a second (the run's and each label's) gets
//! the same run-wide figure, as JMeter's `allThreads` does.
//!
//! Memory: one entry per event (16 bytes; a user makes two), or per gauge reading.

use crate::domain::runs::RunData;

/// A timeline of active users, filled while a file is read, applied once at the end.
#[derive(Debug, Default)]
pub struct ActiveUsers {
    /// (time ms, +1 start / −1 end) events; or (time ms, level) gauge readings.
    events: Vec<(i64, i64)>,
    gauge: bool,
}

impl ActiveUsers {
    /// A timeline built from user start/end events ([`start`](Self::start), [`end`](Self::end)).
    pub fn from_events() -> Self {
        ActiveUsers::default()
    }

    /// A timeline built from gauge readings ([`reading`](Self::reading)); the level holds
    /// from one reading to the next.
    pub fn from_gauge() -> Self {
        ActiveUsers {
            events: Vec::new(),
            gauge: true,
        }
    }

    /// A user started at `t_ms`.
    pub fn start(&mut self, t_ms: i64) {
        self.events.push((t_ms, 1));
    }

    /// A user ended at `t_ms`.
    pub fn end(&mut self, t_ms: i64) {
        self.events.push((t_ms, -1));
    }

    /// The gauge read `level` at `t_ms`.
    pub fn reading(&mut self, t_ms: i64, level: i64) {
        self.events.push((t_ms, level));
    }

    /// True when no event or reading was recorded.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The highest level seen, if any (gauge: the highest reading; events: peak concurrency).
    pub fn max(&self) -> Option<i64> {
        self.levels().iter().map(|&(_, l)| l).max()
    }

    /// (time, level after it) steps, sorted by time. Ends sort before starts at the same
    /// millisecond, so a user replacing another is not counted twice; a level never goes
    /// below 0 (an END whose START is missing from the file).
    fn levels(&self) -> Vec<(i64, i64)> {
        let mut ev = self.events.clone();
        if self.gauge {
            // Stable: readings at the same instant keep file order, the last one wins.
            ev.sort_by_key(|&(t, _)| t);
            return ev;
        }
        ev.sort_unstable();
        let mut level = 0i64;
        ev.into_iter()
            .map(|(t, d)| {
                level = (level + d).max(0);
                (t, level)
            })
            .collect()
    }

    /// Sets `active_users` of every bucket in `data` (see the module docs); buckets keep
    /// what they had when the timeline is empty.
    pub fn apply(&self, data: &mut RunData) {
        if self.events.is_empty() {
            return;
        }
        let steps = self.levels();
        for b in &mut data.buckets {
            let from = b.start_ms;
            let to = from + 1000;
            let i = steps.partition_point(|&(t, _)| t <= from);
            // The level carried in: the last step at or before the second starts.
            let carried = match i {
                0 if self.gauge => None,
                0 => Some(0),
                _ => Some(steps[i - 1].1),
            };
            let within = steps[i..]
                .iter()
                .take_while(|&&(t, _)| t < to)
                .map(|&(_, l)| l)
                .max();
            if let Some(peak) = carried.max(within) {
                b.active_users = Some(u32::try_from(peak.max(0)).unwrap_or(u32::MAX));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::Bucket;

    fn bucket(start_ms: i64) -> Bucket {
        Bucket {
            label: None,
            start_ms,
            count: 1,
            errors: 0,
            sum_ms: 1,
            min_ms: 1,
            max_ms: 1,
            active_users: None,
            histogram: Vec::new(),
        }
    }

    fn applied(u: &ActiveUsers, seconds: &[i64]) -> Vec<Option<u32>> {
        let mut data = RunData {
            buckets: seconds.iter().map(|&s| bucket(s)).collect(),
            ..RunData::default()
        };
        u.apply(&mut data);
        data.buckets.iter().map(|b| b.active_users).collect()
    }

    #[test]
    fn events_give_the_peak_of_each_second() {
        let mut u = ActiveUsers::from_events();
        u.start(100);
        u.start(900);
        u.end(1500);
        u.start(1500); // replaces the one that ended: still 2, not 3
        u.end(2999);
        u.end(3000);
        assert_eq!(
            applied(&u, &[0, 1000, 2000, 3000, 4000]),
            [Some(2), Some(2), Some(2), Some(0), Some(0)]
        );
        assert_eq!(u.max(), Some(2));
    }

    #[test]
    fn gauge_holds_between_readings() {
        let mut u = ActiveUsers::from_gauge();
        u.reading(1000, 1);
        u.reading(2500, 4);
        u.reading(3000, 2);
        assert_eq!(
            applied(&u, &[0, 1000, 2000, 3000, 5000]),
            [None, Some(1), Some(4), Some(2), Some(2)]
        );
        assert_eq!(u.max(), Some(4));
    }
}
