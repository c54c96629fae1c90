/* ptdsim — the least-squares driver of ptdsim fit: GSL nonlinear least
 * squares (gsl_multifit_nlinear, Levenberg-Marquardt with a trust region) on
 * residuals a model computes, with standard errors
 * sqrt(diag((J^T J)^-1) chi^2 / (n - p)); and the straight line
 * t = alpha + size / bandwidth that copies, memory-bound kernels and
 * collectives share. */
#pragma once

#include <glib.h>
#include <stddef.h>

#define CALIB_NLS_MAX_PARAMS 6

typedef void (*CalibResidualFn)(const double *x, const void *data, double *r, size_t n);

typedef struct {
  double x[CALIB_NLS_MAX_PARAMS], se[CALIB_NLS_MAX_PARAMS];
  double rms;     /* root mean square residual */
  double max_abs; /* largest |residual| */
  guint iterations;
} CalibNls;

/* Minimises the sum of squared residuals of `fn` over n points and p
 * parameters from x0.  `what` names the fit in errors (too few points, no
 * convergence). */
gboolean calib_nls(const char *what, CalibResidualFn fn, const void *data, size_t n, size_t p, const double *x0,
                   guint max_iter, CalibNls *res, GError **error);
/* t_us = x[0] + size / (x[1] * 1e3) on relative residuals: x[0] in us,
 * x[1] in GB/s for sizes in bytes. */
gboolean calib_fit_line(const char *what, const double *size, const double *t_us, size_t n, guint max_iter,
                        CalibNls *res, GError **error);
