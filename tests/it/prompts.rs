//! MCP prompts over stdio with rmcp's client: listed with their arguments, rendered with live
//! tool answers, and refused with -32602 when an argument is missing or wrong.

use rmcp::model::{ContentBlock, ErrorData, GetPromptRequestParams};
use rmcp::service::ServiceError;
use serde_json::{json, Map, Value};

use crate::common::mcp::{demo_client, Client};

/// The text of prompt `name` with `arguments`, or the JSON-RPC error code and message.
async fn prompt(client: &Client, name: &str, arguments: Value) -> Result<String, (i32, String)> {
    let mut request = GetPromptRequestParams::new(name);
    if let Value::Object(map) = arguments {
        request.arguments = Some(map);
    } else {
        request.arguments = Some(Map::new());
    }
    match client.service.get_prompt(request).await {
        Ok(result) => Ok(result
            .messages
            .iter()
            .filter_map(|m| match &m.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")),
        Err(ServiceError::McpError(ErrorData { code, message, .. })) => {
            Err((code.0, message.to_string()))
        }
        Err(other) => panic!("{name}: transport failure {other}"),
    }
}

/// A tool's answer text, as the prompts quote it.
async fn tool_text(client: &Client, tool: &str, args: Value) -> String {
    client.call(tool, args).await.expect("tool answers").texts[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_are_listed_with_their_arguments() {
    let (_project, client) = demo_client().await;
    assert!(client
        .service
        .peer_info()
        .expect("server info")
        .capabilities
        .prompts
        .is_some());
    let prompts = client
        .service
        .list_all_prompts()
        .await
        .expect("prompts/list");
    let listed: Vec<(String, Vec<(String, bool)>)> = prompts
        .iter()
        .map(|p| {
            let arguments = p
                .arguments
                .iter()
                .flatten()
                .map(|a| (a.name.clone(), a.required == Some(true)))
                .collect();
            (p.name.clone(), arguments)
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (
                "acp-onboard".to_string(),
                vec![("budget".to_string(), false)]
            ),
            (
                "acp-before-edit".to_string(),
                vec![("path".to_string(), true)]
            ),
            ("acp-debug".to_string(), vec![("problem".to_string(), true)]),
        ]
    );
    assert!(prompts.iter().all(|p| p.description.is_some()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_render_live_answers_of_the_tools() {
    let (_project, client) = demo_client().await;

    let onboard = prompt(&client, "acp-onboard", json!({"budget": "600"}))
        .await
        .unwrap();
    let architecture = tool_text(&client, "acp_get_architecture", json!({})).await;
    let primer = tool_text(&client, "acp_generate_primer", json!({"token_budget": 600})).await;
    assert!(onboard.contains(&architecture), "{onboard}");
    assert!(onboard.contains(&primer), "{onboard}");
    assert!(onboard.contains("600 tokens"), "{onboard}");
    // Without a budget, the primer's default.
    let default = prompt(&client, "acp-onboard", json!({})).await.unwrap();
    assert!(default.contains("4000 tokens"), "{default}");

    let path = "src/auth/session.ts";
    let before = prompt(&client, "acp-before-edit", json!({ "path": path }))
        .await
        .unwrap();
    let constraints = tool_text(&client, "acp_constraints", json!({ "path": path })).await;
    let context = tool_text(&client, "acp_get_file_context", json!({ "path": path })).await;
    assert!(before.contains(&constraints), "{before}");
    assert!(before.contains(&context), "{before}");
    // Staleness first: the demo, freshly copied and imported, is unchanged on disk.
    assert!(
        before.contains("Is the index still true of it?")
            && before.contains("The file is unchanged on disk since the index was imported."),
        "{before}"
    );

    let debug = prompt(
        &client,
        "acp-debug",
        json!({"problem": "tokens expire early"}),
    )
    .await
    .unwrap();
    assert!(
        debug.contains(r#""problem":"tokens expire early""#),
        "{debug}"
    );
    for action in ["attempt", "result", "revert", "resolve"] {
        assert!(
            debug.contains(&format!("action {action}")),
            "{action}: {debug}"
        );
    }
    // Rendering writes nothing: no session was started.
    let sessions = client
        .call("acp_debug", json!({"action": "list"}))
        .await
        .expect("acp_debug list");
    assert!(
        !sessions.texts.join("").contains("tokens expire early"),
        "{:?}",
        sessions.texts
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_prompt_requests_are_invalid_params_naming_what_is_wrong() {
    let (_project, client) = demo_client().await;
    for (name, arguments, expected) in [
        (
            "acp-unknown",
            json!({}),
            "Valid prompts: acp-onboard, acp-before-edit, acp-debug",
        ),
        ("acp-before-edit", json!({}), "path: required"),
        ("acp-debug", json!({"problem": "  "}), "problem: required"),
        (
            "acp-onboard",
            json!({"budget": "lots"}),
            "budget: expected a number of tokens",
        ),
        (
            "acp-before-edit",
            json!({"path": "src/nowhere.ts"}),
            "src/nowhere.ts",
        ),
    ] {
        let (code, message) = prompt(&client, name, arguments.clone()).await.unwrap_err();
        assert_eq!(code, -32602, "{name} {arguments}: {message}");
        assert!(message.contains(expected), "{name} {arguments}: {message}");
    }
    client.close().await;
}
