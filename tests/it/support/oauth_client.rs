//! An MCP client's side of OAuth over HTTP, as ChatGPT's connector goes through it: register,
//! open the consent page (PKCE), collect the code once an operator approved, exchange it, call
//! the tools with the token. The operator's approval is the test's own step between
//! [`OAuthClient::consent_page`] and [`OAuthClient::collect`].

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Where ChatGPT's connector says it wants the code.
pub const REDIRECT: &str = "https://chatgpt.com/connector_platform_oauth_redirect";

/// A client of the MCP endpoint at `base` (`http://LISTEN`), sending `host` as its `Host`
/// when the endpoint is reached by its loopback address under a public name.
pub struct OAuthClient {
    pub base: String,
    pub host: Option<String>,
    /// The `resource` a client names when it asks for a code (RFC 8707), if any.
    pub resource: Option<String>,
    pub http: reqwest::blocking::Client,
}

/// An open consent page: the code it shows the operator, its sealed request, the verifier.
pub struct Consent {
    pub code: String,
    pub request: String,
    pub verifier: String,
    /// The operator's command the page names (`zodex … mcp approve CODE …`).
    pub command: String,
}

impl OAuthClient {
    pub fn new(base: &str, host: Option<&str>, resource: Option<&str>) -> Self {
        Self {
            base: base.trim_end_matches('/').to_string(),
            host: host.map(str::to_string),
            resource: resource.map(str::to_string),
            // The code comes back in a `location` the client reads, never followed.
            http: reqwest::blocking::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    fn at(&self, method: reqwest::Method, path: &str) -> reqwest::blocking::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.host {
            Some(host) => request.header("Host", host),
            None => request,
        }
    }

    pub fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> (u16, Value) {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let answer = self
            .at(reqwest::Method::POST, path)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().unwrap_or(Value::Null))
    }

    pub fn get_json(&self, path: &str) -> (u16, Value) {
        let answer = self.at(reqwest::Method::GET, path).send().unwrap();
        (
            answer.status().as_u16(),
            answer.json().unwrap_or(Value::Null),
        )
    }

    /// Dynamic client registration; the new client's id.
    pub fn register(&self) -> String {
        let answer = self
            .at(reqwest::Method::POST, "/oauth/register")
            .json(&json!({"redirect_uris": [REDIRECT], "client_name": "ChatGPT", "token_endpoint_auth_method": "none"}))
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 201);
        answer.json::<Value>().unwrap()["client_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Opens the consent page for `client_id` (PKCE S256).
    pub fn consent_page(&self, client_id: &str) -> Consent {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).unwrap();
        let verifier = hex::encode(bytes);
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(Sha256::digest(verifier.as_bytes()));
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("state", "st"),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ]);
        if let Some(resource) = &self.resource {
            query.append_pair("resource", resource);
        }
        let path = format!("/oauth/authorize?{}", query.finish());
        let page = self.at(reqwest::Method::GET, &path).send().unwrap();
        assert_eq!(page.status().as_u16(), 200);
        let html = page.text().unwrap();
        Consent {
            code: between(&html, "id=\"user-code\">", "<"),
            request: between(&html, "data-request=\"", "\""),
            command: between(&html, "<pre>", "</pre>"),
            verifier,
        }
    }

    /// The page's poll after the operator's approval, and the code exchanged: the token
    /// answer.
    pub fn collect(&self, client_id: &str, consent: &Consent) -> Value {
        let (_, polled) =
            self.post_form("/oauth/authorize/status", &[("request", &consent.request)]);
        let location = polled["location"]
            .as_str()
            .unwrap_or_else(|| panic!("approved: {polled}"))
            .to_string();
        assert!(location.starts_with(REDIRECT), "{location}");
        let grant_code = location
            .split(['?', '&'])
            .find_map(|part| part.strip_prefix("code="))
            .unwrap()
            .to_string();
        let (status, tokens) = self.post_form(
            "/oauth/token",
            &[
                ("grant_type", "authorization_code"),
                ("code", &grant_code),
                ("redirect_uri", REDIRECT),
                ("client_id", client_id),
                ("code_verifier", &consent.verifier),
            ],
        );
        assert_eq!(status, 200, "{tokens}");
        tokens
    }

    /// `tools/list` with the bearer `token`: the HTTP status.
    pub fn tools_list(&self, token: &str) -> u16 {
        self.at(reqwest::Method::POST, "/mcp")
            .header("Authorization", format!("Bearer {token}"))
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    }
}

/// The text between `start` and the next `end` in `text`.
pub fn between(text: &str, start: &str, end: &str) -> String {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {text}"))
        + start.len();
    let to = text[from..].find(end).unwrap() + from;
    text[from..to].to_string()
}
