// Starts GraphiQL against this server's /graphql. A file of its own (not an inline script)
// so that the page runs under bastion's default Content-Security-Policy (script-src 'self').
// Same-origin fetches send the session or admin cookie and an Origin header, so CSRF
// protection stays on.
"use strict";
(function () {
  var endpoint = new URL("/graphql", window.location.href).toString();
  var fetcher = GraphiQL.createFetcher({ url: endpoint });
  var root = ReactDOM.createRoot(document.getElementById("graphiql"));
  root.render(React.createElement(GraphiQL, { fetcher: fetcher }));
})();
