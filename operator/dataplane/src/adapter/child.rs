//! The stdio child: a process started in its own process group (so that every process it
//! starts goes with it) and stopped with SIGTERM then SIGKILL after a grace; or a server in
//! another container reached through two FIFOs (`--stdio-fifo-dir`, managed mode's Pods,
//! whose kubelet starts and restarts it); or, with `--child-per-session` in such a Pod, one
//! connection to the spawn helper's socket (`mcp-stdio-exec --spawn-socket`), which starts
//! one server per connection and stops it when the connection closes. Either way its stdout is read as bounded lines and
//! its stdin written line by line. Owns no protocol: the lines it reads go to the caller.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use std::path::Path;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::oversized::EDGE_BYTES;

/// A connected child: its pipes, and the process when it is ours.
pub struct Connection {
    /// Our process and its pid (None in FIFO mode: the process is not ours).
    pub process: Option<(Child, u32)>,
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    /// How logs name it.
    pub name: String,
}

pub const STDIN_FIFO: &str = "stdin";
pub const STDOUT_FIFO: &str = "stdout";
const FIFO_POLL: Duration = Duration::from_millis(100);

/// Create the two FIFOs of the FIFO mode in `directory` (the Pod's init container).
pub fn make_fifos(directory: &Path) -> io::Result<()> {
    std::fs::create_dir_all(directory)?;
    for name in [STDIN_FIFO, STDOUT_FIFO] {
        let path = directory.join(name);
        if path.exists() {
            continue;
        }
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
        // SAFETY: a valid NUL-terminated path; mkfifo(3) only creates the file.
        if unsafe { libc::mkfifo(c_path.as_ptr(), 0o666) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // Whatever the umask: the server container may run as the image's own user, another
        // UID than ours. The volume is the Pod's alone (an in-memory emptyDir).
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666))?;
    }
    Ok(())
}

/// Wait for a server process to open both FIFOs of `directory`, and connect to it. The
/// write end cannot be opened (ENXIO) until the server opened its stdin: polled, so that a
/// shutdown is never stuck in open(); the server opens its stdout right after.
pub async fn connect_fifos(directory: &Path) -> io::Result<Connection> {
    let stdin_path = directory.join(STDIN_FIFO);
    let stdin = loop {
        match pipe::OpenOptions::new().open_sender(&stdin_path) {
            Ok(sender) => break sender,
            Err(error) if error.raw_os_error() == Some(libc::ENXIO) => tokio::time::sleep(FIFO_POLL).await,
            Err(error) => return Err(error),
        }
    };
    let stdout_path = directory.join(STDOUT_FIFO);
    let file = tokio::task::spawn_blocking(move || std::fs::File::open(stdout_path))
        .await
        .map_err(io::Error::other)??;
    let stdout = pipe::Receiver::from_file(file)?;
    let name = format!("fifo:{}", directory.display());
    Ok(Connection {
        process: None,
        stdin: Box::new(stdin),
        stdout: Box::new(stdout),
        name,
    })
}

/// The spawn helper's socket in `--stdio-fifo-dir` (`mcp-stdio-exec --spawn-socket`).
pub const SPAWN_SOCKET: &str = "spawn.sock";

/// Connect to the spawn helper's socket: the helper starts one server whose stdin and
/// stdout are this connection. There is no pid: the process is the helper's, and closing
/// our end (end-of-file on the server's stdin) is how it is stopped.
pub async fn connect_socket(directory: &Path) -> io::Result<Connection> {
    let path = directory.join(SPAWN_SOCKET);
    let stream = tokio::net::UnixStream::connect(&path).await?;
    let (stdout, stdin) = stream.into_split();
    Ok(Connection {
        process: None,
        stdin: Box::new(stdin),
        stdout: Box::new(stdout),
        name: format!("spawn:{}", path.display()),
    })
}

/// Start `command` with piped stdin and stdout (stderr is the adapter's own, so the
/// server's logs land in the container's), in a process group of its own, and with a
/// parent-death signal so that it never outlives the adapter.
pub fn spawn(command: &[String]) -> io::Result<Connection> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| io::Error::other("no command"))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd.process_group(0).kill_on_drop(true);
    // SAFETY: prctl is async-signal-safe and touches only the calling (child) process.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("the child exited at once"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("no stdin pipe"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("no stdout pipe"))?;
    let name = format!("pid {pid}");
    Ok(Connection {
        process: Some((child, pid)),
        stdin: Box::new(stdin),
        stdout: Box::new(stdout),
        name,
    })
}

/// Write each line the channel yields to the child's stdin, until either ends.
pub async fn write_lines(
    mut stdin: Box<dyn AsyncWrite + Send + Unpin>,
    mut lines: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(line) = lines.recv().await {
        if stdin.write_all(&line).await.is_err() {
            break;
        }
        // Pipes are unbuffered here; the flush is for the trait's contract.
        if stdin.flush().await.is_err() {
            break;
        }
    }
}

/// One line read from the child.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(Vec<u8>),
    /// A line longer than the limit, skipped unread: only its ends and its size are kept.
    TooLong {
        head: Vec<u8>,
        tail: Vec<u8>,
        size: usize,
    },
}

/// Reads lines of at most `limit` bytes; of a longer line only the first and last
/// `EDGE_BYTES` are kept.
pub struct LineReader<R> {
    reader: BufReader<R>,
    limit: usize,
}

impl<R: tokio::io::AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        Self {
            reader: BufReader::with_capacity(64 * 1024, inner),
            limit,
        }
    }

    /// The next line without its newline, or None at the end of the stream.
    pub async fn next(&mut self) -> io::Result<Option<Line>> {
        let mut line = Vec::new();
        let mut oversized: Option<(Vec<u8>, Vec<u8>, usize)> = None;
        loop {
            let buffer = self.reader.fill_buf().await?;
            if buffer.is_empty() {
                return Ok(match oversized {
                    Some((head, tail, size)) => Some(Line::TooLong { head, tail, size }),
                    None if line.is_empty() => None,
                    None => Some(Line::Text(line)),
                });
            }
            let newline = buffer.iter().position(|b| *b == b'\n');
            let chunk = &buffer[..newline.unwrap_or(buffer.len())];
            let used = newline.map_or(chunk.len(), |end| end + 1);
            match &mut oversized {
                None if line.len() + chunk.len() > self.limit => {
                    let mut head = std::mem::take(&mut line);
                    head.extend_from_slice(chunk);
                    let size = head.len();
                    let tail = head[size.saturating_sub(EDGE_BYTES)..].to_vec();
                    head.truncate(EDGE_BYTES);
                    oversized = Some((head, tail, size));
                }
                None => line.extend_from_slice(chunk),
                Some((_, tail, size)) => {
                    *size += chunk.len();
                    tail.extend_from_slice(chunk);
                    let excess = tail.len().saturating_sub(EDGE_BYTES);
                    tail.drain(..excess);
                }
            }
            self.reader.consume(used);
            if newline.is_some() {
                return Ok(Some(match oversized {
                    Some((head, tail, size)) => Line::TooLong { head, tail, size },
                    None => Line::Text(line),
                }));
            }
        }
    }
}

/// Stop a child's whole process group: SIGTERM, then SIGKILL after `grace`.
pub async fn stop_group(child: &mut Child, pid: u32, grace: Duration) {
    let group = -(pid as i32);
    // SAFETY: kill(2) with a negative pid signals the group the child leads.
    unsafe {
        libc::kill(group, libc::SIGTERM);
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        // SAFETY: as above.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
        let _ = child.wait().await;
    } else {
        // SAFETY: as above; whatever the leader left behind in its group goes too.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, limit);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    #[tokio::test]
    async fn lines_split_on_newlines_and_the_last_needs_none() {
        let got = lines(b"a\nbb\nccc", 10).await;
        assert_eq!(
            got,
            vec![
                Line::Text(b"a".to_vec()),
                Line::Text(b"bb".to_vec()),
                Line::Text(b"ccc".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn of_a_long_line_only_its_ends_are_kept() {
        let mut input = b"HEAD".to_vec();
        input.extend(vec![b'x'; 10 * EDGE_BYTES]);
        input.extend_from_slice(b"TAIL\n");
        let got = lines(&input, 100).await;
        let Line::TooLong { head, tail, size } = &got[0] else {
            panic!("read whole")
        };
        assert_eq!(
            (head.len(), tail.len(), *size),
            (EDGE_BYTES, EDGE_BYTES, 10 * EDGE_BYTES + 8)
        );
        assert!(head.starts_with(b"HEAD") && tail.ends_with(b"TAIL"));
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_skipped_and_the_next_is_read() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        let got = lines(&input, 10).await;
        assert!(
            matches!(&got[0], Line::TooLong { head, tail, size: 100 } if head.len() == 100 && tail.len() == 100)
        );
        assert_eq!(got[1], Line::Text(b"ok".to_vec()));
    }
}
