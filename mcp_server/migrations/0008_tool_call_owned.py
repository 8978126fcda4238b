from django.db import migrations, models


def mark_owned(apps, schema_editor):
    """Calls whose owner is still there were sent by a user (those whose owner is already gone
    cannot be told from calls of callers with no user)."""
    ToolCall = apps.get_model("mcp_server", "ToolCall")
    ToolCall.objects.filter(owner__isnull=False).update(owned=True)


class Migration(migrations.Migration):

    dependencies = [
        ("mcp_server", "0007_tool_call_task"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="owned",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(mark_owned, migrations.RunPython.noop),
    ]
