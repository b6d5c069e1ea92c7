"""Teaching the eviction semantics: a trace as step-by-step views.

``timeline`` computes the views with the model (pure); ``terminal`` and
``html`` draw them; ``svg`` draws one step as a picture; ``play`` is the
interactive prompt; ``playground`` is what the docs site's playground calls in
the browser; ``cli`` is what ``auxspec explain`` and ``auxspec play`` call.
"""
