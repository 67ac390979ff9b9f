//! A chat answer's Markdown (the envelope's `text`) as HTML a display may put in its page as it
//! is: CommonMark with tables and strikethrough, read by pulldown-cmark. Whatever the model
//! wrote, the HTML holds only the elements Markdown makes: raw HTML in the answer reads as
//! text, a link keeps its target only when it is http, https or mailto (any other reads as its
//! words), and an image reads as its description (a page loads nothing a model named).

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// The answer's HTML; empty for an empty answer.
pub(crate) fn answer_html(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    // Links do not nest, nor do images: one flag each says whether the open one was dropped.
    let mut dropped_link = false;
    let mut in_image = false;
    let events = Parser::new_ext(markdown, options).filter_map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::HtmlBlock) | Event::End(TagEnd::HtmlBlock) => None,
        Event::Start(Tag::Link { ref dest_url, .. }) => {
            dropped_link = !linkable(dest_url);
            (!dropped_link).then_some(event)
        }
        Event::End(TagEnd::Link) => (!std::mem::take(&mut dropped_link)).then_some(event),
        Event::Start(Tag::Image { .. }) => {
            in_image = true;
            None
        }
        Event::End(TagEnd::Image) => {
            in_image = false;
            None
        }
        // An image's description is plain text: no markup of the model's inside it.
        other if in_image => match other {
            Event::Text(text) | Event::Code(text) => Some(Event::Text(text)),
            _ => None,
        },
        other => Some(other),
    });
    let mut html = String::with_capacity(markdown.len() + markdown.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// Whether a link's target may stay a link: a web page or a mail address, nothing the page
/// would run or resolve against itself.
fn linkable(target: &str) -> bool {
    let target = target.trim_start().to_ascii_lowercase();
    ["https://", "http://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
}

#[cfg(test)]
mod tests {
    use super::answer_html;

    #[test]
    fn markdown_becomes_its_elements() {
        let html = answer_html(
            "**Pump 1** is *running*.\n\n- flow `84 m3/h`\n- current 12.4 A\n\n\
             | Tag | Value |\n|---|---|\n| Tank1.Level | 92 % |\n\n\
             See [the manual](https://example.com/manual).",
        );
        assert_eq!(
            html,
            "<p><strong>Pump 1</strong> is <em>running</em>.</p>\n\
             <ul>\n<li>flow <code>84 m3/h</code></li>\n<li>current 12.4 A</li>\n</ul>\n\
             <table><thead><tr><th>Tag</th><th>Value</th></tr></thead><tbody>\n\
             <tr><td>Tank1.Level</td><td>92 %</td></tr>\n</tbody></table>\n\
             <p>See <a href=\"https://example.com/manual\">the manual</a>.</p>\n"
        );
    }

    #[test]
    fn nothing_a_model_writes_becomes_markup_a_page_would_run_or_load() {
        let cases = [
            (
                "<script>alert(1)</script>",
                "&lt;script&gt;alert(1)&lt;/script&gt;",
            ),
            (
                "Hi <img src=x onerror=alert(1)> there",
                "Hi &lt;img src=x onerror=alert(1)&gt; there",
            ),
            ("[click](javascript:alert(1))", "<p>click</p>"),
            ("[click]( JavaScript:alert(1) )", "<p>click</p>"),
            ("[x](data:text/html;base64,PHNjcmlwdD4=)", "<p>x</p>"),
            ("[rel](/api/logout)", "<p>rel</p>"),
            (
                "![a *tank* `pic`](https://evil.example/t.png)",
                "<p>a tank pic</p>",
            ),
            (
                "[![logo](https://e.example/l.png)](https://e.example)",
                "<p><a href=\"https://e.example\">logo</a></p>",
            ),
            (
                "<a href=\"javascript:x\">y</a>",
                "&lt;a href=\"javascript:x\"&gt;y&lt;/a&gt;",
            ),
            (
                "[q](https://e.example/\"onmouseover=\"x)",
                "<p><a href=\"https://e.example/%22onmouseover=%22x\">q</a></p>",
            ),
        ];
        for (markdown, wanted) in cases {
            let html = answer_html(markdown);
            assert!(html.contains(wanted), "{markdown:?} gave {html:?}");
        }
    }

    #[test]
    fn only_the_elements_markdown_makes_come_out_of_any_text() {
        // Every tag in the output is one Markdown makes, whatever bytes went in.
        const MADE: &[&str] = &[
            "p",
            "em",
            "strong",
            "code",
            "pre",
            "ul",
            "ol",
            "li",
            "a",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "blockquote",
            "hr",
            "br",
            "table",
            "thead",
            "tbody",
            "tr",
            "th",
            "td",
            "del",
        ];
        let pieces = [
            "<",
            ">",
            "script",
            "img",
            "a",
            " href=",
            "\"",
            "'",
            "javascript:",
            "[",
            "]",
            "(",
            ")",
            "!",
            "*",
            "`",
            "\n",
            "|",
            "-",
            " ",
            "onerror=",
            "&",
            "#",
            "x",
            "</",
            "http://",
            "mailto:",
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            let mut text = String::new();
            for _ in 0..24 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(pieces[usize::try_from(seed % pieces.len() as u64).unwrap_or(0)]);
            }
            let html = answer_html(&text);
            let mut rest = html.as_str();
            while let Some(start) = rest.find('<') {
                let tag: String = rest[start + 1..]
                    .trim_start_matches('/')
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .collect();
                assert!(MADE.contains(&tag.as_str()), "<{tag} from {text:?}: {html:?}");
                rest = &rest[start + 1..];
            }
            for (link, _) in html.match_indices("<a ") {
                let target = &html[link..];
                assert!(
                    ["<a href=\"http://", "<a href=\"https://", "<a href=\"mailto:"]
                        .iter()
                        .any(|start| target.starts_with(start)),
                    "a link to what a page would run, from {text:?}: {html:?}"
                );
            }
        }
    }
}
