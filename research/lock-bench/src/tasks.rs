//! Running a benchmark's tasks to the end.

use crate::BoxError;

/// Waits for every task of `tasks` and gathers what each returned, in the order they end.
/// On the first task that failed or panicked it stops the others and says which, naming
/// the run (`label`) and the kind of task (`what`: "process", "task").
pub async fn join_all<T: 'static, E: std::fmt::Display + 'static>(
    tasks: &mut tokio::task::JoinSet<Result<T, E>>,
    label: &str,
    what: &str,
) -> Result<Vec<T>, BoxError> {
    let mut done = Vec::with_capacity(tasks.len());
    while let Some(joined) = tasks.join_next().await {
        let failure = match joined {
            Ok(Ok(value)) => {
                done.push(value);
                continue;
            }
            Ok(Err(error)) => format!("{label}: a {what} failed: {error}"),
            Err(join_error) => format!("{label}: a {what} panicked: {join_error}"),
        };
        tasks.abort_all();
        return Err(failure.into());
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn joining_gathers_every_result_and_names_a_failed_or_panicked_task() {
        let mut tasks = tokio::task::JoinSet::new();
        for value in [1, 2, 3] {
            tasks.spawn(async move { Ok::<_, String>(value) });
        }
        let mut values = join_all(&mut tasks, "run", "task")
            .await
            .unwrap_or_default();
        values.sort_unstable();
        assert_eq!(values, [1, 2, 3]);

        tasks.spawn(async { Err("storage down".to_owned()) });
        let failed = join_all(&mut tasks, "run", "process")
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            failed.as_deref(),
            Some("run: a process failed: storage down")
        );

        tasks.spawn(async { panic!("boom") });
        let panicked = join_all(&mut tasks, "run", "task")
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            panicked
                .as_deref()
                .is_some_and(|text| text.starts_with("run: a task panicked")),
            "{panicked:?}"
        );
    }
}
