import mcp_server.models.sessions
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("mcp_server", "0009_tool_call_principal_key")]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="trace_context",
            field=models.JSONField(blank=True, encoder=mcp_server.models.sessions.CompactJSONEncoder, null=True),
        ),
    ]
