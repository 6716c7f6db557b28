"""Sphinx settings for the course's web pages (built by ``make site``, see docs/build.py).

docs/build.py runs every lesson on Triton's CPU interpreter before Sphinx starts, so each page
shows the outputs its kernels produced (myst-nb renders them and runs nothing); the widgets
draw their pictures ahead (``TMM_PRERENDER_WIDGETS``).
"""

project = "Tiled matrix multiplication in Triton"  # the title: every page's and the sidebar's
author = "the tmm-course authors"  # the footer's "By ..."
copyright = "the tmm-course authors, MIT license"
html_title = project
extensions = ["myst_nb"]
exclude_patterns = ["_doctrees", "_extra", "**.ipynb_checkpoints"]
html_extra_path = ["_extra"]  # the student notebooks, for the Download links
html_static_path = ["_static"]
html_css_files = ["course.css"]

nb_execution_mode = "off"  # build.py has run them: one line per lesson, kernels over sockets
nb_merge_streams = True
# a check's verdict also carries its JSON (for tools); the page shows the check's HTML
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
html_theme_options = {
    "repository_url": "https://github.com/tmm-course/tmm-course",
    "use_repository_button": True,
    "use_download_button": False,  # each lesson links its student notebook instead
    "home_page_in_toc": True,
    "show_toc_level": 2,
}
html_context = {"default_mode": "auto"}  # the theme's light/dark switch starts from the system's

# the widgets on these pages are HTML drawn ahead (TMM_PRERENDER_WIDGETS), not ipywidgets: load
# no widget manager from a CDN
nb_ipywidgets_js = {}
