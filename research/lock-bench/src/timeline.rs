//! Time as a run measures it: Tokio's, slowed down by the simulated cluster's timer
//! dilation (lock-storage-memory's `ClusterConfig::timer_dilation`), so that a simulated
//! run can model a network faster than Tokio's millisecond timer.

use std::time::Duration;

use tokio::time::Instant as TokioInstant;

/// A run's clock for measuring and sleeping: started at a Tokio instant, `dilation` units of
/// Tokio time per unit of run time (1 on a real cluster).
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    origin: TokioInstant,
    dilation: u32,
}

impl Timeline {
    /// A timeline starting now, at Tokio's pace.
    pub fn start() -> Self {
        Timeline::dilated(1)
    }

    /// A timeline starting now, with `dilation` units of Tokio time per unit of its own
    /// (at least 1).
    pub fn dilated(dilation: u32) -> Self {
        Timeline {
            origin: TokioInstant::now(),
            dilation: dilation.max(1),
        }
    }

    /// Run time since the start.
    pub fn elapsed(&self) -> Duration {
        self.origin.elapsed() / self.dilation
    }

    /// Sleeps for `duration` of run time.
    pub async fn sleep(&self, duration: Duration) {
        tokio::time::sleep(duration.saturating_mul(self.dilation)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_dilated_timeline_runs_slower_than_tokio_by_its_factor() {
        let timeline = Timeline::dilated(1_000);
        timeline.sleep(Duration::from_micros(50)).await;
        assert_eq!(timeline.elapsed(), Duration::from_micros(50));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(
            timeline.elapsed(),
            Duration::from_millis(1) + Duration::from_micros(50)
        );
        assert_eq!(Timeline::dilated(0).dilation, 1);
    }
}
