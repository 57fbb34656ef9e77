from xlarank.cli import app

app(prog_name="xlarank")
