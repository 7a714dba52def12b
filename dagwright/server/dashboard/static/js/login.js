// The login form keeps the fragment of the page asked for (`/runs/<run>#node=<id>`, a node
// panel's address): a browser never sends a fragment to the server, so the `next` the
// server rendered lacks it, and a shared link would open the run without its panel.

const next = document.querySelector("input[name=next]");
if (next && window.location.hash && !next.value.includes("#")) next.value += window.location.hash;
