//! Running `git http-backend` as a CGI program: the request body is streamed into its stdin and
//! its stdout streamed back as the response (nothing is buffered whole, so a 120 MiB push costs
//! a few pipe buffers), after parsing the CGI header block (`Status:`, `Content-Type:`, …).

use super::Git;
use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// The longest CGI header block accepted from the backend.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Runs the backend with `env` (the CGI meta-variables and devhub's own) and `body` as input.
pub async fn run(git: &Git, env: Vec<(String, String)>, body: Body) -> Response {
    let mut command = Command::new(git.bin());
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        // As GitHub: partial clones (`--filter=blob:none`) are served.
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "uploadpack.allowFilter")
        .env("GIT_CONFIG_VALUE_0", "true")
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            tracing::error!(error = %e, git = %git.bin().display(), "devhub: cannot start git http-backend");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "git http-backend could not start\n",
            );
        }
    };
    let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "git http-backend has no pipes\n",
        );
    };
    tokio::spawn(async move {
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let Ok(chunk) = chunk else { break };
            if stdin.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // Dropping stdin closes it: the backend sees end of input.
    });
    tokio::spawn(async move {
        let mut text = String::new();
        let _ = (&mut stderr)
            .take(64 * 1024)
            .read_to_string(&mut text)
            .await;
        if !text.trim().is_empty() {
            tracing::debug!(stderr = %text.trim(), "devhub: git http-backend");
        }
        let _ = child.wait().await;
    });

    let mut reader = BufReader::new(stdout);
    let mut status = StatusCode::OK;
    let mut headers = Vec::new();
    let mut read = 0;
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => {
                tracing::warn!(error = %e, "devhub: reading git http-backend failed");
                return plain(StatusCode::BAD_GATEWAY, "git http-backend failed\n");
            }
        }
        if read > MAX_HEADER_BYTES {
            return plain(
                StatusCode::BAD_GATEWAY,
                "git http-backend sent oversized headers\n",
            );
        }
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().and_then(|c| c.parse().ok());
            status = code
                .and_then(|c| StatusCode::from_u16(c).ok())
                .unwrap_or(StatusCode::BAD_GATEWAY);
        } else if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.push((name, value));
        }
    }
    let mut response = Response::new(Body::from_stream(tokio_util::io::ReaderStream::new(reader)));
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().append(name, value);
    }
    response
}

/// A `text/plain` answer: git prints such bodies to the user as `remote: …` lines.
pub fn plain(status: StatusCode, text: &str) -> Response {
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        text.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cgi_headers_and_status_are_parsed() {
        // A stand-in backend: `sh -c` printing a CGI answer, run through the same code path.
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("git");
        std::fs::write(
            &fake,
            "#!/bin/sh\ncat >/dev/null\nprintf 'Status: 404 Not Found\\r\\nContent-Type: text/plain\\r\\n\\r\\nnope\\n'\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let response = run(&Git::new(&fake), Vec::new(), Body::from("input")).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(response.headers()["content-type"], "text/plain");
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"nope\n");
    }
}
