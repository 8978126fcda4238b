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
