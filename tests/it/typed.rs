//! Typed answers over stdio with rmcp's client: the tools acpdb defines declare an
//! `outputSchema`, every answer of theirs carries `structuredContent` that is valid against it
//! and equal to the JSON of its text, and the reference tools keep their text-only answers.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::common::mcp::{demo_client, Client};

/// The tools that answer with structured content.
const TYPED: [&str; 8] = [
    "acp_query",
    "acp_expand",
    "acp_constraints",
    "acp_impact",
    "acp_trace",
    "acp_unused",
    "acp_debug",
    "acp_hack",
];

/// Every tool's output schema from tools/list (`None` for a tool without one).
async fn output_schemas(client: &Client) -> HashMap<String, Option<Value>> {
    client
        .service
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| {
            let schema = tool
                .output_schema
                .map(|schema| Value::Object(schema.as_ref().clone()));
            (tool.name.to_string(), schema)
        })
        .collect()
}

/// The validation errors of `instance` against `schema`.
fn violations(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("a valid JSON Schema");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Calls `tool` and checks its structured answer against `schema` and against its text;
/// returns the structured answer.
async fn typed_call(client: &Client, schema: &Value, tool: &str, args: Value) -> Value {
    let answer = match client.call(tool, args.clone()).await {
        Ok(answer) => answer,
        Err(err) => panic!("{tool} {args} failed: {err:?}"),
    };
    let structured = answer
        .structured
        .unwrap_or_else(|| panic!("{tool} {args}: no structuredContent"));
    assert_eq!(
        structured, answer.json,
        "{tool} {args}: structured content differs from the text"
    );
    let errors = violations(schema, &structured);
    assert!(errors.is_empty(), "{tool} {args}: {errors:?}\n{structured}");
    structured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_acpdb_defines_declare_an_object_output_schema_and_the_reference_tools_none() {
    let (_project, client) = demo_client().await;
    let schemas = output_schemas(&client).await;
    for tool in TYPED {
        let schema = schemas[tool]
            .as_ref()
            .unwrap_or_else(|| panic!("{tool} has no outputSchema"));
        assert_eq!(schema["type"], "object", "{tool}: {schema}");
        jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("{tool}: {e}"));
    }
    let untyped: Vec<&String> = schemas
        .iter()
        .filter(|(name, schema)| !TYPED.contains(&name.as_str()) && schema.is_some())
        .map(|(name, _)| name)
        .collect();
    assert!(untyped.is_empty(), "unexpected output schemas: {untyped:?}");
    assert!(schemas.len() >= TYPED.len() + 9, "{:?}", schemas.keys());
    // The reference tools answer with text only, exactly as before.
    let answer = client
        .call(
            "acp_get_file_context",
            json!({"path": "src/auth/session.ts"}),
        )
        .await
        .expect("file context");
    assert_eq!(answer.structured, None);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_structured_answer_is_valid_against_its_schema_and_equal_to_its_text() {
    let (project, client) = demo_client().await;
    // Edited on disk since the import: answers naming it list it in `stale_files`, which the
    // schemas declare.
    project.edit_source("src/auth/session.ts");
    let schemas = output_schemas(&client).await;
    let schema = |tool: &str| schemas[tool].clone().expect("an output schema");

    let query = schema("acp_query");
    let mut kinds = Vec::new();
    for args in [
        json!({"type": "symbol", "name": "validateSession"}),
        json!({"type": "file", "name": "src/auth/session.ts"}),
        json!({"type": "domain", "name": "auth", "limit": 1}),
        json!({"type": "callers", "name": "digest", "depth": 2, "limit": 1}),
        json!({"type": "callees", "name": "validateSession"}),
        json!({"type": "search", "pattern": "session", "limit": 2}),
        json!({"type": "search", "pattern": "valid*", "limit": 0}),
        json!({"type": "stats"}),
    ] {
        let answer = typed_call(&client, &query, "acp_query", args).await;
        kinds.push(answer["type"].as_str().unwrap().to_string());
    }
    assert_eq!(
        kinds,
        ["symbol", "file", "domain", "callers", "callees", "search", "search", "stats"]
    );

    let expand = schema("acp_expand");
    for args in [
        json!({"text": "See $SYM_VALIDATESESSION and $NOPE"}),
        json!({"text": "$DOM_AUTH", "mode": "full"}),
        json!({"text": "$DOM_AUTH", "mode": "annotated"}),
    ] {
        typed_call(&client, &expand, "acp_expand", args).await;
    }

    let constraints = schema("acp_constraints");
    for args in [
        json!({"file": "src/auth/session.ts"}),
        json!({"file": "src/billing/tax.ts"}),
        json!({"file": "src/nope.ts"}),
    ] {
        typed_call(&client, &constraints, "acp_constraints", args).await;
    }

    let impact = schema("acp_impact");
    for args in [
        json!({"files": ["src/auth/session.ts"], "depth": 3}),
        json!({"symbols": ["digest"], "limit": 1}),
        json!({"symbols": ["digest"], "limit": 0}),
    ] {
        typed_call(&client, &impact, "acp_impact", args).await;
    }

    let trace = schema("acp_trace");
    for args in [
        json!({"from": "main", "to": "digest"}),
        json!({"from": "digest", "to": "main", "max_depth": 10}),
    ] {
        typed_call(&client, &trace, "acp_trace", args).await;
    }
    let unused = schema("acp_unused");
    for args in [json!({}), json!({"include_exported": true, "limit": 1})] {
        typed_call(&client, &unused, "acp_unused", args).await;
    }

    // Answers naming the edited file list it, valid against their schemas.
    for (tool, args) in [
        (
            "acp_query",
            json!({"type": "symbol", "name": "validateSession"}),
        ),
        ("acp_constraints", json!({"file": "src/auth/session.ts"})),
        ("acp_impact", json!({"files": ["src/auth/session.ts"]})),
        ("acp_trace", json!({"from": "main", "to": "digest"})),
    ] {
        let answer = typed_call(&client, &schema(tool), tool, args).await;
        assert_eq!(
            answer["stale_files"][0]["path"], "src/auth/session.ts",
            "{tool}: {answer}"
        );
    }

    let debug = schema("acp_debug");
    let started = typed_call(
        &client,
        &debug,
        "acp_debug",
        json!({"action": "start", "data": {"problem": "Login fails", "hypothesis": "Expired token"}}),
    )
    .await;
    let session = started["session_id"].as_str().unwrap().to_string();
    let attempt = typed_call(
        &client,
        &debug,
        "acp_debug",
        json!({"action": "attempt", "data": {"session_id": session, "description": "Refresh", "files": ["src/auth/session.ts"]}}),
    )
    .await;
    let attempt_id = attempt["attempt_id"].as_str().unwrap().to_string();
    let mut actions = vec![started["action"].clone(), attempt["action"].clone()];
    for args in [
        json!({"action": "result", "data": {"session_id": session, "attempt_id": attempt_id, "success": false, "notes": "still fails"}}),
        json!({"action": "revert", "data": {"session_id": session, "attempt_id": attempt_id}}),
        json!({"action": "status", "data": {"session_id": session}}),
        json!({"action": "list"}),
        json!({"action": "resolve", "data": {"session_id": session, "resolution": "Clock skew"}}),
    ] {
        let answer = typed_call(&client, &debug, "acp_debug", args).await;
        actions.push(answer["action"].clone());
    }
    assert_eq!(
        actions,
        ["start", "attempt", "result", "revert", "status", "list", "resolve"]
    );

    let hack = schema("acp_hack");
    let marked = typed_call(
        &client,
        &hack,
        "acp_hack",
        json!({"action": "mark", "data": {"file": "src/auth/token.ts", "line": 3, "reason": "skip MFA", "expires": "2000-01-01"}}),
    )
    .await;
    let id = marked["hack"]["id"].as_str().unwrap().to_string();
    for (args, action) in [
        (json!({"action": "list"}), "list"),
        (json!({"action": "cleanup"}), "cleanup"),
        (json!({"action": "revert", "data": {"id": id}}), "revert"),
    ] {
        let answer = typed_call(&client, &hack, "acp_hack", args).await;
        assert_eq!(answer["action"], action);
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_schemas_refuse_answers_of_the_wrong_shape() {
    let (_project, client) = demo_client().await;
    let schemas = output_schemas(&client).await;
    let schema = |tool: &str| schemas[tool].clone().expect("an output schema");
    let cases = [
        // A search answer without its total.
        (
            "acp_query",
            json!({"type": "search", "pattern": "session"}),
            "/result/total",
        ),
        // A debug answer of an action that does not exist.
        ("acp_debug", json!({"action": "list"}), "/action"),
        // Impact totals that are not counts.
        (
            "acp_impact",
            json!({"symbols": ["digest"]}),
            "/totals/impacted_symbols",
        ),
    ];
    for (tool, args, pointer) in cases {
        let answer = client.call(tool, args.clone()).await.expect("answers");
        let mut wrong = answer.structured.expect("structured content");
        assert!(violations(&schema(tool), &wrong).is_empty());
        let (parent, leaf) = pointer.rsplit_once('/').unwrap();
        let parent = wrong.pointer_mut(parent).expect(pointer);
        match leaf {
            "total" => {
                parent.as_object_mut().unwrap().remove("total");
            }
            "action" => parent["action"] = json!("teleport"),
            _ => parent[leaf] = json!("many"),
        }
        assert!(
            !violations(&schema(tool), &wrong).is_empty(),
            "{tool}: the schema accepts {wrong}"
        );
    }
    client.close().await;
}

/// Every `format` keyword in `schema`, with where it is (a property named `format` is an object
/// and not counted).
fn formats(schema: &Value, at: &str, out: &mut Vec<String>) {
    match schema {
        Value::Object(members) => {
            for (key, member) in members {
                if let (true, Some(format)) = (key == "format", member.as_str()) {
                    out.push(format!("{at}: {format}"));
                }
                formats(member, &format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                formats(item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Clients that validate with a strict JSON Schema 2020-12 validator (MCP Inspector among them)
/// accept every tool's input and output schema: no format outside the standard's, which such a
/// validator refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_schema_passes_a_strict_2020_12_validator() {
    let (_project, client) = demo_client().await;
    let tools = client.service.list_all_tools().await.expect("tools/list");
    assert!(tools.len() >= TYPED.len() + 9);
    let strict = || {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .should_ignore_unknown_formats(false)
    };
    let mut bounded = 0;
    for tool in &tools {
        let input = Value::Object(tool.input_schema.as_ref().clone());
        let output = tool
            .output_schema
            .as_ref()
            .map(|schema| Value::Object(schema.as_ref().clone()));
        for (kind, schema) in [("input", Some(input)), ("output", output)] {
            let Some(schema) = schema else { continue };
            if let Err(err) = strict().build(&schema) {
                panic!("{} {kind} schema: {err}\n{schema}", tool.name);
            }
            let mut found = Vec::new();
            formats(&schema, "#", &mut found);
            assert!(
                found.iter().all(|f| {
                    let format = f.rsplit(": ").next().unwrap();
                    acpdb::schemas::STANDARD_FORMATS.contains(&format)
                }),
                "{} {kind} schema: {found:?}",
                tool.name
            );
            bounded += schema.to_string().matches("\"minimum\":0").count();
        }
    }
    // The unsigned integers kept their bound (limits, depths, lines, counts).
    assert!(bounded >= 20, "{bounded}");
    // The strict validator does refuse a format it does not know.
    let openapi = json!({"type": "integer", "format": "uint32"});
    assert!(strict().build(&openapi).is_err());
    client.close().await;
}
