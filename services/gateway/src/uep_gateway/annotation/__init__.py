"""Human evaluation in the gateway: questions and answers (questions), task creation (tasks), assignment
and submission (assignment), human scores as ScoreComputed (scores), agreement (agreement, analysis) and
the annotation page (templates/annotate.html)."""
