"""Email templates in Authorizer's placeholder subset: what is accepted, refused and rendered."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bastion.core.templating import TemplateSyntaxError, compile_template, render

#: An email template as operators bring them from Authorizer (Go html/template syntax).
AUTHORIZER_STYLE = """<html><body>
  <img src="{{.organization.logo}}" alt="{{.organization.name}}">
  <p>Hey {{.user.given_name}},</p>
  <p>Click <a href="{{ .verification_url }}">here</a> to verify {{.user.email}}.</p>
  {{/* the footer is the same for every mail */}}
  <p>{{.organization.name}} team</p>
</body></html>"""

VARIABLES = {
    "user": {"email": "ada@example.test", "given_name": "Ada", "email_verified": False},
    "organization": {"name": "Acme", "logo": "https://acme.test/logo.png"},
    "verification_url": "https://auth.acme.test/verify_email?token=t&redirect_uri=x",
}


def test_authorizer_style_template_renders_its_fields() -> None:
    out = render(compile_template(AUTHORIZER_STYLE), VARIABLES, escape=True)
    assert '<img src="https://acme.test/logo.png" alt="Acme">' in out
    assert "Hey Ada," in out
    assert 'href="https://auth.acme.test/verify_email?token=t&amp;redirect_uri=x"' in out
    assert "verify ada@example.test." in out
    assert "footer" not in out  # comments render nothing
    assert "{{" not in out


def test_values_are_html_escaped_in_bodies_and_not_in_subjects() -> None:
    template = compile_template("Hi {{.user.given_name}}")
    hostile = {"user": {"given_name": '<script>alert("x")</script>'}}
    assert render(template, hostile, escape=True) == (
        "Hi &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"
    )
    assert render(template, hostile, escape=False) == 'Hi <script>alert("x")</script>'


def test_missing_fields_and_objects_render_empty_and_booleans_as_go_does() -> None:
    template = compile_template("[{{.user.nickname}}][{{.user}}][{{.nope.deeper}}][{{.ok}}]")
    assert render(template, {"user": {"email": "a"}, "ok": True}, escape=True) == "[][][][true]"


def test_only_the_variables_are_reachable() -> None:
    # No attribute or method access: a path into a non-mapping value renders nothing.
    template = compile_template("{{.user.email.__class__}}{{.otp.upper}}")
    assert render(template, {"user": {"email": "a"}, "otp": "abc"}, escape=False) == ""


def test_text_without_actions_is_kept_as_is() -> None:
    source = "Plain text, braces { } and } } stay."
    assert render(compile_template(source), {}, escape=True) == source


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{{ .otp | upper }}", "pipelines are not supported"),
        ("{{if .user.email}}x{{end}}", "'if' is not supported"),
        ("{{range .items}}{{.}}{{end}}", "'range' is not supported"),
        ("{{with .user}}{{.email}}{{end}}", "'with' is not supported"),
        ('{{template "x"}}', "'template' is not supported"),
        ('{{printf "%s" .otp}}', "not a field path"),
        ("{{call .fn}}", "not a field path"),
        ("{{$x := .otp}}", "variables are not supported"),
        ("{{.}}", "{{.}} is not supported"),
        ("{{- .otp -}}", "trim markers"),
        ("{{}}", "an empty action"),
        ("{{.user..email}}", "not a field path"),
        ("{{.user.1email}}", "not a field path"),
        ("Hello\n{{.user.email", "line 2: unclosed action"),
    ],
)
def test_anything_beyond_field_paths_is_refused_with_the_reason(source: str, reason: str) -> None:
    with pytest.raises(TemplateSyntaxError) as caught:
        compile_template(source)
    assert reason in str(caught.value)


def test_the_refusal_names_the_line() -> None:
    with pytest.raises(TemplateSyntaxError, match=r"^line 3: "):
        compile_template("a\nb\n{{ .x | y }}")


_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)


@given(st.lists(_NAMES, min_size=1, max_size=4), st.text(max_size=40))
def test_any_field_path_renders_its_value_escaped(path: list[str], value: str) -> None:
    variables: dict[str, object] = {path[-1]: value}
    for name in reversed(path[:-1]):
        variables = {name: variables}
    template = compile_template("<{{." + ".".join(path) + "}}>")
    out = render(template, variables, escape=True)
    assert out[0] == "<"
    assert out[-1] == ">"
    assert "<" not in out[1:-1]
    assert '"' not in out[1:-1]


@given(st.text(max_size=200))
def test_compiling_any_text_either_works_or_says_why(source: str) -> None:
    refusal = None
    try:
        template = compile_template(source)
    except TemplateSyntaxError as exc:
        refusal = str(exc)
    else:
        render(template, VARIABLES, escape=True)
    assert refusal is None or refusal.startswith("line ")
