//! The instances' output as the loop sees it: FIFOs followed after an adoption, relays to
//! stdout, output files reopened for logrotate and drained at the end.

use super::*;

impl Supervisor {
    /// Reads the output of an adopted instance again from its FIFO, where it has one: what it
    /// wrote while no supervisor read is lost (its writes failed with EPIPE; SIGPIPE is
    /// ignored in instances), what it writes from now on goes where its spec says.
    pub(super) fn follow_output(&mut self, name: &str, spec: &InstanceSpec) {
        let reader = match self.fifos.reopen(name) {
            Some(Ok(reader)) => reader,
            Some(Err(e)) => {
                return log(name, &format!("cannot read its output again: {e}: it is lost"));
            }
            None => {
                return log(
                    name,
                    "its output went through a pipe of the pinctl that started it, which is \
                     gone: what it writes is lost until it restarts (instances started by this \
                     pinctl write into a FIFO that outlives a detach)",
                );
            }
        };
        match self.output_file(name, spec) {
            Ok(Some(file)) => {
                let instance = name.to_string();
                file.pump(
                    reader,
                    Box::new(move |opened| {
                        if let Err(e) = opened {
                            log(&instance, &format!("its output is lost: {e}"));
                        }
                    }),
                );
            }
            Ok(None) => self.relay(name, reader),
            Err(e) => return log(name, &format!("its output is not written: {e}")),
        }
        log(
            name,
            "its output is read again from its FIFO (what it wrote while no supervisor read it \
             is lost)",
        );
    }

    /// Waits (at most [`DRAIN_PATIENCE`]) until the FIFOs of the stopped instances are read to
    /// their end: the last lines an instance wrote before it exited (a database's `Shutdown
    /// complete`) may still be in its FIFO when its exit is known. Only when the supervisor
    /// stops: nothing else is left for the loop to do.
    pub(super) async fn drain_fifos(&mut self) {
        let deadline = std::time::Instant::now() + DRAIN_PATIENCE;
        let pumps = std::mem::take(&mut self.pumps);
        let _ = tokio::time::timeout(DRAIN_PATIENCE, async {
            for p in pumps {
                let _ = p.await;
            }
        })
        .await;
        for file in self.outputs.values() {
            file.wait_drained(deadline.saturating_duration_since(std::time::Instant::now()));
        }
    }

    /// Ends every output file's pumps, giving them together at most [`DRAIN_PATIENCE`] to
    /// write what they hold (a file system that does not answer must not keep pinctl from
    /// exiting).
    pub(super) fn close_outputs(&mut self) {
        let deadline = std::time::Instant::now() + DRAIN_PATIENCE;
        for (_, file) in self.outputs.drain() {
            file.close(deadline.saturating_duration_since(std::time::Instant::now()));
        }
    }

    /// The output file of instance `name` as `spec` says (`None`: its output goes to
    /// pinctl's stdout): the one it has while path and user stay the same, else a new one.
    pub(super) fn output_file(
        &mut self,
        name: &str,
        spec: &InstanceSpec,
    ) -> Result<Option<Arc<OutputFile>>, String> {
        let Some(path) = &spec.output else {
            if let Some(old) = self.outputs.remove(name) {
                old.close(Duration::ZERO);
            }
            return Ok(None);
        };
        let owner = launch::output_owner(spec).map_err(|f| f.reason)?;
        if let Some(file) = self.outputs.get(name).filter(|f| f.writes(path, owner.as_ref())) {
            return Ok(Some(file.clone()));
        }
        let file = OutputFile::new(name, path, owner);
        if let Some(old) = self.outputs.insert(name.to_string(), file.clone()) {
            old.close(Duration::ZERO);
        }
        Ok(Some(file))
    }

    /// Relays the FIFO `reader` of instance `name` to pinctl's stdout until every writer of it
    /// closed, on a task kept in `pumps` (finished ones are dropped).
    pub(super) fn relay(&mut self, name: &str, reader: OwnedFd) {
        self.pumps.retain(|p| !p.is_finished());
        self.pumps.push(tokio::spawn(relay::relay_instance(name.to_string(), reader)));
    }

    /// Asks every output file's writer to open its file again at its path (logrotate moved
    /// it): what to wait for, by instance.
    pub(super) fn reopen_outputs(&self) -> Vec<(String, Arc<OutputFile>, u64)> {
        let mut asked: Vec<_> =
            self.outputs.iter().map(|(n, f)| (n.clone(), f.clone(), f.ask_reopen())).collect();
        asked.sort_by(|a, b| a.0.cmp(&b.0));
        asked
    }
}
