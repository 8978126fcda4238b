"""Every JSON-RPC method and notification name of the protocol, in one place."""

INITIALIZE = "initialize"
PING = "ping"
SERVER_DISCOVER = "server/discover"
LOGGING_SET_LEVEL = "logging/setLevel"

TOOLS_LIST = "tools/list"
TOOLS_CALL = "tools/call"
PROMPTS_LIST = "prompts/list"
PROMPTS_GET = "prompts/get"
RESOURCES_LIST = "resources/list"
RESOURCES_READ = "resources/read"
RESOURCES_TEMPLATES_LIST = "resources/templates/list"
RESOURCES_SUBSCRIBE = "resources/subscribe"
RESOURCES_UNSUBSCRIBE = "resources/unsubscribe"
COMPLETION_COMPLETE = "completion/complete"
SUBSCRIPTIONS_LISTEN = "subscriptions/listen"

# Server-to-client requests.
ROOTS_LIST = "roots/list"
SAMPLING_CREATE_MESSAGE = "sampling/createMessage"
ELICITATION_CREATE = "elicitation/create"

# Notifications.
NOTIFICATIONS_INITIALIZED = "notifications/initialized"
NOTIFICATIONS_CANCELLED = "notifications/cancelled"
NOTIFICATIONS_PROGRESS = "notifications/progress"
NOTIFICATIONS_MESSAGE = "notifications/message"
NOTIFICATIONS_TOOLS_LIST_CHANGED = "notifications/tools/list_changed"
NOTIFICATIONS_PROMPTS_LIST_CHANGED = "notifications/prompts/list_changed"
NOTIFICATIONS_RESOURCES_LIST_CHANGED = "notifications/resources/list_changed"
NOTIFICATIONS_RESOURCES_UPDATED = "notifications/resources/updated"
NOTIFICATIONS_ROOTS_LIST_CHANGED = "notifications/roots/list_changed"
NOTIFICATIONS_ELICITATION_COMPLETE = "notifications/elicitation/complete"
NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED = "notifications/subscriptions/acknowledged"

NOTIFICATION_PREFIX = "notifications/"

# The Tasks extension (SEP-2663): its id in capabilities, its requests and its notification.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASKS_GET = "tasks/get"
TASKS_UPDATE = "tasks/update"
TASKS_CANCEL = "tasks/cancel"
TASK_METHODS = (TASKS_GET, TASKS_UPDATE, TASKS_CANCEL)
NOTIFICATIONS_TASKS = "notifications/tasks"

# The Skills extension (SEP-2640): its id, its two requests, and the directory read it adds to
# resources (declared by ``directoryRead``).
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
SKILLS_LIST = "skills/list"
SKILLS_GET = "skills/get"
RESOURCES_DIRECTORY_READ = "resources/directory/read"

# The body parameter that the ``Mcp-Name`` header mirrors, per method (SEP-2243); the Tasks
# extension routes its requests by task id (SEP-2663).
NAME_PARAMS = {TOOLS_CALL: "name", PROMPTS_GET: "name", RESOURCES_READ: "uri",
               TASKS_GET: "taskId", TASKS_UPDATE: "taskId", TASKS_CANCEL: "taskId"}
