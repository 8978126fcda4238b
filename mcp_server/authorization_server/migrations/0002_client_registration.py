import django.db.models.deletion
from django.db import migrations, models
from oauth2_provider.settings import oauth2_settings


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(oauth2_settings.APPLICATION_MODEL),
        ("mcp_authorization_server", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ClientRegistration",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("address", models.CharField(blank=True, default="", max_length=64)),
                ("application", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                     related_name="mcp_registration",
                                                     to=oauth2_settings.APPLICATION_MODEL)),
            ],
            options={"verbose_name": "client registration"},
        ),
    ]
