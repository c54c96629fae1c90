/* ptdsim — the least-squares driver of ptdsim fit (see nls.h). */
#include "nls.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <string.h>

#include "../measure/measurements.h"


/* --- the least-squares driver --- */


typedef struct {
  CalibResidualFn fn;
  const void *data;
} Problem;


static int nls_f(const gsl_vector *x, void *params, gsl_vector *f) {
  const Problem *pb = params;
  double xv[CALIB_NLS_MAX_PARAMS];
  for (size_t i = 0; i < x->size; i++)
    xv[i] = gsl_vector_get(x, i);
  double r[4096];
  size_t n = f->size;
  double *out = n <= G_N_ELEMENTS(r) ? r : g_new(double, n);
  pb->fn(xv, pb->data, out, n);
  int status = GSL_SUCCESS;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(out[i]))
      status = GSL_EDOM;
    gsl_vector_set(f, i, out[i]);
  }
  if (out != r)
    g_free(out);
  return status;
}

/* Minimises the sum of squared residuals from x0.  `what` names the fit in
 * errors. */
gboolean calib_nls(const char *what, CalibResidualFn fn, const void *data, size_t n, size_t p, const double *x0,
                    guint max_iter, CalibNls *res, GError **error) {
  memset(res, 0, sizeof *res);
  if (n < p + 1) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_TOO_FEW,
                "too few points for the %s fit: %zu given, it needs at least %zu (%zu parameters plus one)", what, n,
                p + 1, p);
    return FALSE;
  }
  gsl_set_error_handler_off(); /* GSL's default handler aborts; we report */
  Problem pb = {fn, data};
  gsl_multifit_nlinear_fdf fdf = {.f = nls_f, .df = NULL, .fvv = NULL, .n = n, .p = p, .params = &pb};
  gsl_multifit_nlinear_parameters params = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &params, n, p);
  gsl_vector *x = gsl_vector_alloc(p);
  for (size_t i = 0; i < p; i++)
    gsl_vector_set(x, i, x0[i]);
  int info = 0;
  int status = gsl_multifit_nlinear_init(x, &fdf, w);
  if (status == GSL_SUCCESS)
    status = gsl_multifit_nlinear_driver(max_iter, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
  gsl_vector *f = gsl_multifit_nlinear_residual(w);
  double chisq = 0;
  gsl_blas_ddot(f, f, &chisq);
  res->iterations = (guint)gsl_multifit_nlinear_niter(w);
  res->rms = sqrt(chisq / n);
  for (size_t i = 0; i < n; i++)
    res->max_abs = fmax(res->max_abs, fabs(gsl_vector_get(f, i)));
  /* A residual at rounding level (noise-free synthetic data, or a start at
   * the answer) is convergence, whatever the driver said about progress. */
  if (res->rms < 1e-9 && isfinite(chisq))
    status = GSL_SUCCESS;
  gboolean ok = status == GSL_SUCCESS && isfinite(chisq);
  if (!ok) {
    g_set_error(error, CALIB_ERROR, CALIB_ERROR_NO_CONVERGENCE,
                "the %s fit did not converge (%s after %u iterations, rms relative residual %.3g); check the "
                "measurements for outliers or raise --max-iterations",
                what, gsl_strerror(status), res->iterations, res->rms);
  } else {
    gsl_matrix *J = gsl_multifit_nlinear_jac(w);
    gsl_matrix *cov = gsl_matrix_alloc(p, p);
    gsl_multifit_nlinear_covar(J, 0.0, cov);
    double scale = n > p ? chisq / (double)(n - p) : 0;
    const gsl_vector *xs = gsl_multifit_nlinear_position(w);
    for (size_t i = 0; i < p; i++) {
      res->x[i] = gsl_vector_get(xs, i);
      res->se[i] = sqrt(fmax(0, gsl_matrix_get(cov, i, i) * scale));
    }
    gsl_matrix_free(cov);
  }
  gsl_vector_free(x);
  gsl_multifit_nlinear_free(w);
  return ok;
}

/* --- the straight line --- */

typedef struct {
  const double *size, *t; /* size: bytes (memory) or bus bytes (collective); t: us */
} LineData;

/* t = alpha_us + size / (bw_GBps * 1e3) */
static void line_residuals(const double *x, const void *data, double *r, size_t n) {
  const LineData *d = data;
  for (size_t i = 0; i < n; i++)
    r[i] = (x[0] + d->size[i] / (x[1] * 1e3) - d->t[i]) / d->t[i];
}

gboolean calib_fit_line(const char *what, const double *size, const double *t, size_t n, guint max_iter,
                         CalibNls *res, GError **error) {
  double bw0 = 0, t0 = INFINITY;
  for (size_t i = 0; i < n; i++) {
    bw0 = fmax(bw0, size[i] / (t[i] * 1e3));
    t0 = fmin(t0, t[i]);
  }
  double x0[2] = {0.5 * t0, bw0 > 0 ? bw0 : 1};
  LineData d = {size, t};
  return calib_nls(what, line_residuals, &d, n, 2, x0, max_iter, res, error);
}

