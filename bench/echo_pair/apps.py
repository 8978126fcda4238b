from django.apps import AppConfig


class EchoPairConfig(AppConfig):
    name = "bench.echo_pair"
    label = "bench_echo_pair"
    verbose_name = "Benchmark tools"
