"""A scripted OpenAI-compatible streaming model server for tests and the demo (stdlib only).

```python
from roost.fakellm import FakeLLM, text, tool_call, last_user_contains, last_is_tool_result

with FakeLLM() as llm:
    llm.add(last_user_contains("list files"), tool_call("bash", {"command": "ls"}), times=1)
    llm.add(last_is_tool_result("bash"), text("done"))
    ...  # point pi's models.json at llm.base_url (see kit.testpi.make_agent_dir)
    req = llm.wait_for_request(last_is_tool_result("bash"))
```
"""

from roost.fakellm.matchers import (
    Matcher,
    all_of,
    always,
    any_message_contains,
    any_of,
    first_user_contains,
    has_tool,
    last_is_tool_result,
    last_tool_result_contains,
    last_user_contains,
    predicate,
    system_contains,
)
from roost.fakellm.replies import Reply, ToolCall, error, text, tool_call, tool_calls
from roost.fakellm.requests import (
    Request,
    first_user_text,
    last_user_text,
    message_text,
    messages_text,
    system_text,
    tool_names,
    tool_results,
)
from roost.fakellm.script import ScriptError, load_script
from roost.fakellm.server import FakeLLM, Rule

__all__ = [
    "FakeLLM",
    "Matcher",
    "Reply",
    "Request",
    "Rule",
    "ScriptError",
    "ToolCall",
    "all_of",
    "always",
    "any_message_contains",
    "any_of",
    "error",
    "first_user_contains",
    "first_user_text",
    "has_tool",
    "last_is_tool_result",
    "last_tool_result_contains",
    "last_user_contains",
    "last_user_text",
    "load_script",
    "message_text",
    "messages_text",
    "predicate",
    "system_contains",
    "system_text",
    "text",
    "tool_call",
    "tool_calls",
    "tool_names",
    "tool_results",
]
