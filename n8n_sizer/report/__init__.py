"""The report of a run: the model and Markdown (`build`), the plots (`plots`), and the advice section (`advice`).

May import: runs, telemetry (alerts), bench (find-max and soak summaries), advisor, errors; matplotlib for plots.
"""
